// The webhooks family on LMDB: the outbox (`webhook_outbox`, key [thread_id, run_id], written by
// the thread's actor in its run's final batch) and how each finished delivery ended
// (`webhook_outcomes`, kept while its run exists). The webhook worker writes attempts and ends.
import type { Storage } from "../env.ts";
import type { WebhookDeliveryRecord, WebhookOutcomeRecord } from "../records.ts";
import type { RunKey, WebhooksPort } from "../port.ts";

export class LmdbWebhooks implements WebhooksPort {
  constructor(private readonly s: Storage) {}

  anyPending(): Promise<boolean> {
    for (const _ of this.s.webhookOutbox.getKeys({ limit: 1 })) return Promise.resolve(true);
    return Promise.resolve(false);
  }

  pending(): Promise<{ key: RunKey; nextAttemptAt: string }[]> {
    return Promise.resolve(
      Array.from(this.s.webhookOutbox.getRange({}), ({ key, value }) => ({ key: { threadId: key[0], runId: key[1] }, nextAttemptAt: value.next_attempt_at })),
    );
  }

  get(key: RunKey): Promise<WebhookDeliveryRecord | undefined> {
    return Promise.resolve(this.s.webhookOutbox.get([key.threadId, key.runId]));
  }

  outcome(key: RunKey): Promise<WebhookOutcomeRecord | undefined> {
    return Promise.resolve(this.s.webhookOutcomes.get([key.threadId, key.runId]));
  }

  async retry(key: RunKey, delivery: WebhookDeliveryRecord): Promise<void> {
    await this.s.webhookOutbox.put([key.threadId, key.runId], delivery);
  }

  async end(key: RunKey, outcome: WebhookOutcomeRecord): Promise<void> {
    const s = this.s;
    const k: [string, string] = [key.threadId, key.runId];
    // a stateless run's temporary thread (or a deleted run) has no record to read the outcome with
    const runExists = s.runs.doesExist(k);
    await s.root.batch(() => {
      s.webhookOutbox.remove(k);
      if (runExists) s.webhookOutcomes.put(k, outcome);
    });
  }
}
