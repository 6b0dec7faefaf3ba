// The webhook worker's side of the outbox: each delivery at its due time, retried on the schedule
// of retry-schedule.ts, every attempt's outcome written back so a restart carries on where it was
// (at least once: an attempt cut off by a crash is made again with the same `webhook-id`).
import type { StoragePort } from "../storage/port.ts";
import type { WebhookAttemptRecord, WebhookDeliveryRecord, WebhookOutcomeRecord } from "../storage/records.ts";
import type { WebhookCounters } from "./counters.ts";
import type { BoundedRunner } from "./limiter.ts";
import type { DeliveryKey } from "./outbox.ts";
import { webhookBody } from "./payload.ts";
import { judgeAttempt, RETRY_DELAYS_MS } from "./retry-schedule.ts";
import type { WebhookSender } from "./sender.ts";
import type { DeliverySigner } from "./signing.ts";
import { urlForLog, validateWebhookUrl, type WebhookUrlPolicy } from "./url-policy.ts";

export type OutboxStorage = Pick<StoragePort, "webhooks" | "refreshReads">;

export interface DelivererOptions {
  storage: OutboxStorage;
  sender: WebhookSender;
  signer: DeliverySigner;
  runner: BoundedRunner;
  counters: WebhookCounters;
  /** re-checked before each attempt (the HTTP layer checks at run creation); null = none */
  urlPolicy: WebhookUrlPolicy | null;
  /** waits between attempts; default RETRY_DELAYS_MS (tests shorten it) */
  retryDelaysMs?: readonly number[];
  log: (message: string) => void;
}

const decoder = new TextDecoder();
const keyOf = ([threadId, runId]: DeliveryKey): string => `${threadId}/${runId}`;

export class OutboxDeliverer {
  /** deliveries this worker has taken on, by key: waiting for their time (timer) or queued/attempting */
  private readonly known = new Map<string, NodeJS.Timeout | null>();
  private settledWaiters: (() => void)[] = [];
  private closed = false;

  constructor(private readonly o: DelivererOptions) {}

  /** Takes on every delivery in the outbox, each at its due time (when the worker starts). */
  async loadOutbox(): Promise<number> {
    const pending = await this.o.storage.webhooks.pending();
    for (const { key, nextAttemptAt } of pending) this.schedule([key.threadId, key.runId], Date.parse(nextAttemptAt));
    return pending.length;
  }

  /** A delivery just committed to the outbox (a shard's message after the run's final commit), or taken over at its due time. */
  due(key: DeliveryKey, at = Date.now()): void {
    this.schedule(key, Number.isNaN(at) ? Date.now() : at);
  }

  /** Resolves once this worker has no delivery left to make (tests). */
  settled(): Promise<void> {
    if (this.known.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.settledWaiters.push(resolve));
  }

  close(): void {
    this.closed = true;
    for (const timer of this.known.values()) if (timer) clearTimeout(timer);
    this.known.clear();
  }

  private schedule(key: DeliveryKey, at: number): void {
    const k = keyOf(key);
    if (this.closed || this.known.has(k)) return; // already taken on (the startup scan and a shard's message)
    this.wait(k, key, at);
  }

  private wait(k: string, key: DeliveryKey, at: number): void {
    const start = () => {
      this.known.set(k, null);
      this.o.runner.run(() => this.attempt(k, key));
    };
    const delay = at - Date.now();
    if (delay <= 0) return start();
    const timer = setTimeout(start, delay);
    timer.unref();
    this.known.set(k, timer);
  }

  private async attempt(k: string, key: DeliveryKey): Promise<void> {
    const { storage, counters } = this.o;
    if (this.closed) return;
    storage.refreshReads(); // see the commit the shard's message announced
    const delivery = await storage.webhooks.get({ threadId: key[0], runId: key[1] });
    if (delivery === undefined) return this.forget(k); // delivered or given up meanwhile
    const refused = this.o.urlPolicy ? validateWebhookUrl(delivery.url, this.o.urlPolicy) : null;
    if (refused) {
      this.o.log(`webhook ${urlForLog(delivery.url)} for run ${key[1]} not sent: ${refused}`);
      await this.end(k, key, delivery, "failed", { at: new Date().toISOString(), error: `refused: ${refused}` });
      return;
    }
    const at = new Date();
    const body = webhookBody(delivery.payload, delivery.values === undefined ? undefined : decoder.decode(delivery.values), at.toISOString());
    const result = await this.o.sender.attempt(delivery.url, body, this.o.signer.headers(delivery.delivery_id, body, at));
    if (this.closed) return; // the worker is stopping: the outbox keeps the delivery for the next start
    counters.add("attempts");
    const attempts = delivery.attempts + 1;
    const last: WebhookAttemptRecord = { at: at.toISOString() };
    if (result.status !== undefined) last.status_code = result.status;
    const verdict = judgeAttempt(result, attempts, this.o.retryDelaysMs ?? RETRY_DELAYS_MS);
    if (verdict.kind === "delivered") return this.end(k, key, { ...delivery, attempts }, "delivered", last);
    last.error = verdict.reason;
    if (verdict.kind === "failed") {
      this.o.log(`failed to call webhook ${urlForLog(delivery.url)} for run ${key[1]} after ${attempts} attempt(s): ${verdict.reason}; given up`);
      return this.end(k, key, { ...delivery, attempts }, "failed", last);
    }
    counters.add("retried");
    const next = Date.now() + verdict.delayMs;
    this.o.log(
      `failed to call webhook ${urlForLog(delivery.url)} for run ${key[1]} (attempt ${attempts}): ${verdict.reason}; next attempt in ${Math.round(verdict.delayMs / 1000)} s`,
    );
    await this.record(() =>
      storage.webhooks.retry({ threadId: key[0], runId: key[1] }, { ...delivery, attempts, next_attempt_at: new Date(next).toISOString(), last_attempt: last }),
    );
    if (this.closed) return;
    this.wait(k, key, next);
  }

  /** The delivery leaves the outbox; its outcome stays readable while its run exists. */
  private async end(
    k: string,
    key: DeliveryKey,
    delivery: WebhookDeliveryRecord,
    state: WebhookOutcomeRecord["state"],
    last: WebhookAttemptRecord,
  ): Promise<void> {
    const { storage, counters } = this.o;
    counters.add(state);
    const outcome: WebhookOutcomeRecord = {
      delivery_id: delivery.delivery_id,
      state,
      attempts: delivery.attempts,
      created_at: delivery.created_at,
      last_attempt: last,
    };
    await this.record(() => storage.webhooks.end({ threadId: key[0], runId: key[1] }, outcome));
    this.forget(k);
  }

  /** A write of the worker's own bookkeeping; a failed one is logged (the delivery stays as it was in the outbox). */
  private async record(write: () => Promise<unknown>): Promise<void> {
    try {
      await write();
    } catch (err) {
      if (!this.closed) this.o.log(`webhook outbox write failed: ${(err as Error).message}`);
    }
  }

  private forget(k: string): void {
    this.known.delete(k);
    if (this.known.size > 0) return;
    const waiters = this.settledWaiters;
    this.settledWaiters = [];
    for (const w of waiters) w();
  }
}
