// Crash recovery of one shard: the runs a previous server left pending or running (active_runs)
// go back to their threads' actors, which carry out recorded stops, resume or requeue them
// (lifecycle.ts recoveryPlan).
import type { Storage } from "../storage/env.ts";
import type { RunRecord } from "../storage/records.ts";
import type { ThreadActor } from "./thread-actor.ts";

/** After a restart: runs still pending or running go back to their actors' queues. */
export function recoverActiveRuns(storage: Storage, owns: (threadId: string) => boolean, actorFor: (threadId: string) => ThreadActor): void {
  const byThread = new Map<string, RunRecord[]>();
  for (const { key } of storage.activeRuns.getRange({})) {
    const [threadId, runId] = key;
    if (!owns(threadId)) continue;
    const run = storage.runs.get([threadId, runId]);
    if (!run) {
      void storage.activeRuns.remove(key);
      continue;
    }
    let list = byThread.get(threadId);
    if (!list) byThread.set(threadId, (list = []));
    list.push(run);
  }
  for (const [threadId, runs] of byThread) {
    runs.sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : 0));
    actorFor(threadId).recover(runs);
  }
}
