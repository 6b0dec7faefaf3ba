// When a webhook delivery is tried again, and when it is given up (pure, unit-tested). The
// schedule is durable: the outbox keeps each delivery's attempt count and next attempt time, so
// it carries on across restarts (src/webhooks/README.md documents it).

/** Waits before the 2nd, 3rd, … attempt: 10 attempts over ~33 h in all. */
export const RETRY_DELAYS_MS: readonly number[] = [
  2_000,
  10_000,
  60_000,
  5 * 60_000,
  30 * 60_000,
  2 * 3_600_000,
  6 * 3_600_000,
  12 * 3_600_000,
  12 * 3_600_000,
];

/** What one attempt saw: the receiver's status, or an error before any status (network, timeout). */
export interface AttemptResult {
  status?: number;
  /** the receiver's Retry-After, in ms */
  retryAfterMs?: number;
  error?: string;
  /** not worth another attempt (an address the policy refuses, address-check.ts) */
  final?: boolean;
}

export type AttemptVerdict = { kind: "delivered" } | { kind: "retry"; delayMs: number; reason: string } | { kind: "failed"; reason: string };

/** Why an attempt did not deliver, for logs and the delivery record. */
export function attemptError(r: AttemptResult): string {
  return r.error ?? `HTTP ${r.status}`;
}

/**
 * The verdict on attempt number `attempts` (1 = the first): 2xx delivers; 410 Gone and a refused
 * address give up at once; anything else (other statuses, network errors,
 * timeouts) is retried after the next delay of the schedule, ±10% jitter, or after a longer
 * Retry-After (capped at the schedule's longest delay), until the schedule is exhausted.
 */
export function judgeAttempt(
  r: AttemptResult,
  attempts: number,
  delays: readonly number[] = RETRY_DELAYS_MS,
  random: () => number = Math.random,
): AttemptVerdict {
  if (r.status !== undefined && r.status >= 200 && r.status < 300) return { kind: "delivered" };
  const reason = attemptError(r);
  if (r.status === 410) return { kind: "failed", reason: `${reason} (Gone: not retried)` };
  if (r.final) return { kind: "failed", reason };
  if (attempts > delays.length) return { kind: "failed", reason };
  const scheduled = Math.round(delays[attempts - 1]! * (0.9 + 0.2 * random()));
  const longest = Math.max(...delays);
  const delayMs = r.retryAfterMs === undefined ? scheduled : Math.max(scheduled, Math.min(r.retryAfterMs, longest));
  return { kind: "retry", delayMs, reason };
}
