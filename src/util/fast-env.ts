// In a worker thread process.env is a native per-thread copy of the environment, and every read
// crosses into C++ (~160-200 ns on the 2-core VM). LangChain and LangGraph read environment
// variables (tracing, callbacks) hundreds of times per run: ~2% of an echo run's worker CPU.
// A plain object with the same contents answers a read in ~50 ns behind a proxy that only keeps
// process.env's behaviour of storing assigned values as strings.

/** Replaces this worker thread's process.env by a plain copy (call once, before running graphs). */
export function useFastEnv(): void {
  const values: Record<string, string | undefined> = { ...process.env };
  process.env = new Proxy(values, {
    set(target, key, value: unknown) {
      if (typeof key === "string") target[key] = String(value);
      return true;
    },
  });
}
