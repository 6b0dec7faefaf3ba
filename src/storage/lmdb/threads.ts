// The threads family on LMDB: thread records with their index (indexes/threads.ts), their state
// values as JSON text (`thread_values`) and their own TTLs (`thread_ttl`). Records are written only
// by the thread's actor; TTLs by the HTTP thread.
import type { Storage } from "../env.ts";
import type { ThreadRecord, WebhookDeliveryRecord } from "../records.ts";
import { countThreads, putThread, removeThread, searchThreads } from "../indexes/threads.ts";
import { writable } from "../indexes/index-db.ts";
import type { Page, PageSpec, ThreadFilter, ThreadSort, ThreadsPort } from "../port.ts";

export class LmdbThreads implements ThreadsPort {
  constructor(private readonly s: Storage) {}

  get(threadId: string): Promise<ThreadRecord | undefined> {
    return Promise.resolve(this.s.threads.get(threadId));
  }

  valuesJson(threadId: string): Promise<string | undefined> {
    return Promise.resolve(this.s.threadValues.get(threadId));
  }

  search(q: ThreadFilter & PageSpec<ThreadSort>): Promise<Page<ThreadRecord>> {
    return searchThreads(this.s, q);
  }

  count(f: ThreadFilter): Promise<number> {
    return countThreads(this.s, f);
  }

  ttl(threadId: string): Promise<number | undefined> {
    return Promise.resolve(this.s.threadTtl.get(threadId));
  }

  async setTtl(threadId: string, minutes: number | null): Promise<void> {
    if (minutes !== null) await this.s.threadTtl.put(threadId, minutes);
    else if (this.s.threadTtl.doesExist(threadId)) await this.s.threadTtl.remove(threadId);
  }

  sweepCandidates(q: { all: boolean; after?: string; limit: number }): Promise<string[]> {
    const range = { ...(q.after === undefined ? {} : { start: q.after, exclusiveStart: true }), limit: q.limit };
    return Promise.resolve(Array.from(q.all ? this.s.threads.getKeys(range) : this.s.threadTtl.getKeys(range)));
  }

  async create(record: ThreadRecord, valuesJson?: string): Promise<ThreadRecord | "exists"> {
    const s = this.s;
    // a conditional batch, not a transaction: lmdb-js' write thread checks the id and writes the
    // record and its index entries without calling back into this thread (a transaction runs its
    // callback here, each put a B-tree write on this thread)
    const created = await writable(s.threads).ifNoExists(record.thread_id, () => {
      putThread(s, record, undefined);
      if (valuesJson !== undefined) s.threadValues.put(record.thread_id, valuesJson);
    });
    return created ? record : "exists";
  }

  async save(record: ThreadRecord, valuesJson: string | undefined, prev: ThreadRecord | undefined): Promise<void> {
    const s = this.s;
    // a batch, like the run writes: it commits in issue order with them (a transaction's callback
    // runs after every queued batch, so a run write issued after it could land first)
    await s.root.batch(() => {
      putThread(s, record, prev);
      if (valuesJson !== undefined) s.threadValues.put(record.thread_id, valuesJson);
    });
  }

  async delete(threadId: string, webhook?: { runId: string; delivery: WebhookDeliveryRecord }): Promise<void> {
    const s = this.s;
    await s.root.transaction(() => {
      for (const { key } of s.runs.getRange({ start: [threadId], end: [threadId, "\uffff"] })) {
        s.runs.remove(key);
        s.runThread.remove(key[1]);
        s.activeRuns.remove(key);
        s.webhookOutcomes.remove(key); // (a delivery still in the outbox is made all the same)
      }
      const thread = s.threads.get(threadId);
      if (thread) removeThread(s, thread);
      s.threadValues.remove(threadId);
      s.threadTtl.remove(threadId);
      if (webhook) s.webhookOutbox.put([threadId, webhook.runId], webhook.delivery);
    });
  }
}
