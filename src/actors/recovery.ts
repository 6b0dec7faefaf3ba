// Crash recovery of one shard: the runs a previous server left pending or running (the runs
// family's active entries) go back to their threads' actors, which carry out recorded stops,
// resume or requeue them (lifecycle.ts recoveryPlan).
import type { RunsPort } from "../storage/port.ts";
import type { RunRecord } from "../storage/records.ts";
import type { ThreadActor } from "./thread-actor.ts";

/**
 * After a restart: runs still pending or running go back to their actors' queues. In a cluster, one
 * thread's (`onlyThread`) when this node takes its lease over. Returns how many runs were re-admitted.
 */
export async function recoverActiveRuns(
  runs: RunsPort,
  owns: (threadId: string) => boolean,
  actorFor: (threadId: string) => ThreadActor,
  onlyThread?: string,
): Promise<number> {
  const byThread = new Map<string, RunRecord[]>();
  let recovered = 0;
  for await (const { threadId, runId, run } of runs.active(onlyThread)) {
    if (!owns(threadId)) continue;
    if (!run) {
      void runs.dropActive({ threadId, runId });
      continue;
    }
    let list = byThread.get(threadId);
    if (!list) byThread.set(threadId, (list = []));
    list.push(run);
    recovered++;
  }
  for (const [threadId, list] of byThread) {
    list.sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : 0));
    actorFor(threadId).recover(list);
  }
  return recovered;
}
