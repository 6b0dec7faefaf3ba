// The runs family on LMDB: run records keyed [thread_id, run_id] (UUID v7: a thread's runs in
// creation order), run_id -> thread_id (`run_thread`) and the pending/running ones (`active_runs`).
// Writes are lmdb-js batches handed over when called (Issued.committed is the batch's promise):
// lmdb-js commits batches in the order they were issued, which is the per-thread write order the
// port promises, and the actor never waits for its own thread's write thread on the hot path.
import type { Storage } from "../env.ts";
import type { RunRecord, RunStatus, ThreadRecord, ThreadStatus, WebhookDeliveryRecord } from "../records.ts";
import { entriesInChunks, SCAN_CHUNK } from "../scan.ts";
import { putThread } from "../indexes/threads.ts";
import { putThreadValues } from "../thread-values.ts";
import type { ActiveRun, Issued, QueuedStop, RunKey, RunsPort } from "../port.ts";

const threadRange = (threadId: string): { start: [string, string] | [string]; end: [string, string] } => ({ start: [threadId], end: [threadId, "\uffff"] });

export class LmdbRuns implements RunsPort {
  constructor(private readonly s: Storage) {}

  get(threadId: string, runId: string): Promise<RunRecord | undefined> {
    return Promise.resolve(this.s.runs.get([threadId, runId]));
  }

  exists(threadId: string, runId: string): Promise<boolean> {
    return Promise.resolve(this.s.runs.doesExist([threadId, runId]));
  }

  threadOf(runId: string): Promise<string | undefined> {
    return Promise.resolve(this.s.runThread.get(runId));
  }

  async list(threadId: string, q: { status?: RunStatus; offset: number; limit: number }): Promise<RunRecord[]> {
    const s = this.s;
    const range = threadRange(threadId) as { start: [string, string]; end: [string, string] };
    const out: RunRecord[] = [];
    // paging a long thread's runs: LMDB skips the offset without decoding those records
    if (!q.status) return Array.from(s.runs.getRange({ ...range, offset: q.offset, limit: q.limit }), (e) => e.value);
    let skipped = 0;
    /** adds a run with the status; true once the page is full */
    const take = (run: RunRecord | undefined): boolean => {
      if (run === undefined || run.status !== q.status) return false;
      if (skipped < q.offset) skipped++;
      else out.push(run);
      return out.length >= q.limit;
    };
    if (q.status === "pending" || q.status === "running") {
      // active_runs lists exactly the thread's pending and running runs, in the same order
      for (const { key } of s.activeRuns.getRange(range)) if (take(s.runs.get(key))) break;
    } else {
      // a finished status: a walk of the thread's runs, in chunks (a long thread does not stall other requests)
      for await (const { value } of entriesInChunks(s.runs, SCAN_CHUNK, range)) if (take(value)) break;
    }
    return out;
  }

  latest(threadId: string): Promise<RunRecord | undefined> {
    for (const { value } of this.s.runs.getRange({ start: [threadId, "\uffff"], end: [threadId], reverse: true, limit: 1 })) return Promise.resolve(value);
    return Promise.resolve(undefined);
  }

  async *active(threadId?: string): AsyncGenerator<ActiveRun> {
    const s = this.s;
    const range = threadId === undefined ? {} : threadRange(threadId);
    for (const { key } of s.activeRuns.getRange(range as { start?: [string, string] })) {
      yield { threadId: key[0], runId: key[1], run: s.runs.get(key) };
    }
  }

  async *ofAssistant(assistantId: string, threadId?: string): AsyncGenerator<RunRecord> {
    const bounds = threadId === undefined ? {} : (threadRange(threadId) as { start: [string, string]; end: [string, string] });
    for await (const { value } of entriesInChunks(this.s.runs, SCAN_CHUNK, bounds)) if (value.assistant_id === assistantId) yield value;
  }

  create(c: { run: RunRecord; thread: ThreadRecord; prev: ThreadRecord | undefined; running?: RunRecord; stopped?: readonly QueuedStop[] }): Issued {
    const s = this.s;
    const { run } = c;
    // a batch (writes only): lmdb-js' write thread commits it without calling back into this thread
    const committed = s.root.batch(() => {
      putThread(s, c.thread, c.prev);
      s.runs.put([run.thread_id, run.run_id], run);
      s.runThread.put(run.run_id, run.thread_id);
      s.activeRuns.put([run.thread_id, run.run_id], 1);
      if (c.running) s.runs.put([c.running.thread_id, c.running.run_id], c.running);
      if (c.stopped) for (const stop of c.stopped) this.writeStop(stop);
    });
    return { committed: committed as Promise<unknown> as Promise<void> };
  }

  save(run: RunRecord): Issued {
    return { committed: this.s.runs.put([run.thread_id, run.run_id], run) as Promise<unknown> as Promise<void> };
  }

  finish(end: {
    run: RunRecord | { rolledBack: RunKey };
    thread: ThreadRecord;
    prev: ThreadRecord;
    valuesJson: Uint8Array | undefined;
    webhook?: WebhookDeliveryRecord;
  }): Issued {
    const s = this.s;
    const threadId = end.thread.thread_id;
    // a batch, not a transaction callback: lmdb-js' write thread commits it without waiting for this thread
    const committed = s.root.batch(() => {
      const run = end.run;
      let runId: string;
      if ("rolledBack" in run) {
        runId = run.rolledBack.runId;
        s.runs.remove([threadId, runId]);
        s.runThread.remove(runId);
      } else {
        runId = run.run_id;
        s.runs.put([threadId, runId], run);
      }
      s.activeRuns.remove([threadId, runId]);
      putThread(s, end.thread, end.prev);
      if (end.valuesJson !== undefined) putThreadValues(s, threadId, end.valuesJson);
      else s.threadValues.remove(threadId);
      if (end.webhook) s.webhookOutbox.put([threadId, runId], end.webhook);
    });
    return { committed: committed as Promise<unknown> as Promise<void> };
  }

  async stopQueued(threadId: string, stop: QueuedStop, threadStatus: ThreadStatus, now: string): Promise<void> {
    const s = this.s;
    await s.root.transaction(() => {
      const thread = s.threads.get(threadId);
      this.writeStop(stop);
      if (thread) putThread(s, { ...thread, status: threadStatus, updated_at: now }, thread);
    });
  }

  /** The writes that end a queued run a stop reached (inside the stop's transaction or batch). */
  private writeStop(stop: QueuedStop): void {
    const s = this.s;
    if ("rolledBack" in stop) {
      const key: [string, string] = [stop.rolledBack.threadId, stop.rolledBack.runId];
      s.activeRuns.remove(key);
      s.runs.remove(key);
      s.runThread.remove(key[1]);
      return;
    }
    const key: [string, string] = [stop.final.thread_id, stop.final.run_id];
    s.activeRuns.remove(key);
    s.runs.put(key, stop.final);
    if (stop.webhook) s.webhookOutbox.put(key, stop.webhook);
  }

  async discard(key: RunKey, webhook?: WebhookDeliveryRecord): Promise<void> {
    const s = this.s;
    const k: [string, string] = [key.threadId, key.runId];
    await s.root.transaction(() => {
      s.runs.remove(k);
      s.runThread.remove(key.runId);
      s.activeRuns.remove(k);
      if (webhook) s.webhookOutbox.put(k, webhook);
    });
  }

  async delete(threadId: string, runId: string): Promise<void> {
    const s = this.s;
    await s.root.transaction(() => {
      s.runs.remove([threadId, runId]);
      s.runThread.remove(runId);
      s.webhookOutcomes.remove([threadId, runId]);
    });
  }

  async dropActive(key: RunKey): Promise<void> {
    await this.s.activeRuns.remove([key.threadId, key.runId]);
  }
}
