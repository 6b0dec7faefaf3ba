// Webhook delivery counters, kept in a SharedArrayBuffer: the webhook worker counts with
// Atomics, and any thread holding the buffer (the main thread's WebhookWorkerHost, a future
// /metrics route) reads them without a message round trip.

export const WEBHOOK_COUNTER_NAMES = [
  /** deliveries the receiver took (2xx) */
  "delivered",
  /** deliveries given up: schedule exhausted, 410 Gone, or URL refused by the policy */
  "failed",
  /** attempts that failed and were scheduled again */
  "retried",
  /** attempts made in all */
  "attempts",
] as const;

export type WebhookCounterName = (typeof WEBHOOK_COUNTER_NAMES)[number];

export class WebhookCounters {
  private readonly slots: BigInt64Array;

  constructor(readonly buffer: SharedArrayBuffer = new SharedArrayBuffer(WEBHOOK_COUNTER_NAMES.length * 8)) {
    this.slots = new BigInt64Array(buffer, 0, WEBHOOK_COUNTER_NAMES.length);
  }

  add(name: WebhookCounterName, n = 1): void {
    Atomics.add(this.slots, WEBHOOK_COUNTER_NAMES.indexOf(name), BigInt(n));
  }

  /** The counts since the server started. */
  snapshot(): Record<WebhookCounterName, number> {
    const out = {} as Record<WebhookCounterName, number>;
    WEBHOOK_COUNTER_NAMES.forEach((name, i) => (out[name] = Number(Atomics.load(this.slots, i))));
    return out;
  }
}
