// Waiting for a condition instead of sleeping: tests poll what they assert on, with a generous
// deadline (machines are shared and noisy), and fail with a message that says what never happened.

export interface WaitOptions {
  /** give up after this long (default 10 s) */
  timeoutMs?: number;
  /** poll this often (default 20 ms) */
  intervalMs?: number;
  /** what was awaited, for the failure message */
  what?: string;
}

/**
 * Resolves with the first truthy value `probe` returns (sync or async); rejects after the timeout
 * with `what` and the last value or error seen.
 */
export async function waitUntil<T>(probe: () => T | Promise<T>, opts: WaitOptions = {}): Promise<NonNullable<T>> {
  const deadline = Date.now() + (opts.timeoutMs ?? 10_000);
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value) return value as NonNullable<T>;
      last = value;
    } catch (err) {
      last = err;
    }
    if (Date.now() >= deadline) {
      const seen = last instanceof Error ? last.message : JSON.stringify(last);
      throw new Error(`timed out after ${opts.timeoutMs ?? 10_000} ms waiting for ${opts.what ?? "a condition"} (last seen: ${seen})`);
    }
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 20));
  }
}
