// The runs family on LMDB: run records keyed [thread_id, run_id] (UUID v7: a thread's runs in
// creation order), run_id -> thread_id (`run_thread`) and the pending/running ones (`active_runs`).
import type { Storage } from "../env.ts";
import type { RunRecord, RunStatus } from "../records.ts";
import { entriesInChunks, SCAN_CHUNK } from "../scan.ts";
import type { ActiveRun, RunsReadPort } from "../port.ts";

const threadRange = (threadId: string): { start: [string, string] | [string]; end: [string, string] } => ({ start: [threadId], end: [threadId, "\uffff"] });

export class LmdbRuns implements RunsReadPort {
  constructor(private readonly s: Storage) {}

  get(threadId: string, runId: string): Promise<RunRecord | undefined> {
    return Promise.resolve(this.s.runs.get([threadId, runId]));
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
}
