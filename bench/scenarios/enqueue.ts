// enqueue-1000: many background runs on ONE thread (multitask_strategy "enqueue"), then join the
// last one created and page the thread's run list until every run is finished.
import { performance } from "node:perf_hooks";
import { createBackgroundRun, createThread, expectRunOutput, listRuns, runBody, type RunSummary } from "../api.ts";
import { ErrorTally } from "../error-tally.ts";
import type { HttpClient } from "../http/types.ts";
import { SampleBuffer, summarize } from "../stats.ts";
import { sleep, withDeadline } from "./deadline.ts";
import { latencyMetrics, metric } from "./metrics.ts";
import type { Scenario, ScenarioOutcome } from "./types.ts";

const CREATE_CONCURRENCY = 16;
const POLL_MS = 200;

/**
 * All runs of a thread, page by page. A server that slices `[offset, limit)` instead of
 * `[offset, offset+limit)` (the JS server's quirk) answers an empty second page; that is detected
 * by asking again with `limit = offset + pageSize`, and reported.
 */
export async function listAllRuns(
  client: HttpClient,
  threadId: string,
  pageSize: number,
  expected: number,
): Promise<{ runs: Map<string, string>; sliceQuirk: boolean }> {
  const runs = new Map<string, string>();
  let sliceQuirk = false;
  for (let offset = 0; offset <= expected + pageSize; offset += pageSize) {
    let page: RunSummary[] = await listRuns(client, threadId, sliceQuirk ? offset + pageSize : pageSize, offset);
    if (page.length === 0 && offset > 0 && !sliceQuirk) {
      const probe = await listRuns(client, threadId, offset + pageSize, offset);
      if (probe.length > 0) {
        sliceQuirk = true;
        page = probe;
      }
    }
    for (const r of page) runs.set(r.runId, r.status);
    if (page.length < pageSize) break;
  }
  return { runs, sliceQuirk };
}

export const enqueueScenario: Scenario = {
  name: "enqueue-1000",
  describe: (o) => `${o.enqueueRuns} background runs (${o.echoGraph}, enqueue) on one thread at concurrency ${CREATE_CONCURRENCY}, until all done`,
  // Joining the last run can take long without a byte on the wire, so this scenario's idle limit is its whole budget.
  run: (ctx) =>
    withDeadline(
      ctx,
      async ({ client, expired }): Promise<ScenarioOutcome> => {
        const o = ctx.options;
        const errors = new ErrorTally();
        const notes: string[] = [];
        let threadId: string;
        try {
          threadId = await createThread(client);
        } catch (err) {
          errors.addThrown(err);
          return { metrics: [], errors: errors.report(), notes: ["could not create the thread"] };
        }
        const body = runBody(o.echoGraph, { multitaskStrategy: "enqueue" });
        const createLatency = new SampleBuffer();
        const runIds: string[] = []; // in order of creation responses
        let next = 0;
        const t0 = performance.now();
        const creator = async (): Promise<void> => {
          while (next < o.enqueueRuns && !expired()) {
            next++;
            const t = performance.now();
            try {
              runIds.push(await createBackgroundRun(client, threadId, body));
              createLatency.push(performance.now() - t);
            } catch (err) {
              errors.addThrown(err);
            }
          }
        };
        await Promise.all(Array.from({ length: CREATE_CONCURRENCY }, creator));
        const createdS = (performance.now() - t0) / 1000;
        ctx.progress(`  created ${runIds.length} runs in ${createdS.toFixed(2)} s; joining the last one`);

        let joinS: number | null = null;
        const last = runIds[runIds.length - 1];
        if (last !== undefined) {
          try {
            expectRunOutput(await client.request(client.prepare("GET", `/threads/${threadId}/runs/${last}/join`)));
          } catch (err) {
            errors.addThrown(err);
          }
          joinS = (performance.now() - t0) / 1000;
        }

        let statuses = new Map<string, string>();
        let allDoneS: number | null = null;
        let sliceQuirk = false;
        while (runIds.length > 0 && !expired()) {
          try {
            const listed = await listAllRuns(client, threadId, o.pageSize, runIds.length);
            statuses = listed.runs;
            sliceQuirk ||= listed.sliceQuirk;
          } catch (err) {
            errors.addThrown(err);
            break;
          }
          const unfinished = runIds.filter((id) => {
            const s = statuses.get(id);
            return s === undefined || s === "pending" || s === "running";
          });
          if (unfinished.length === 0) {
            allDoneS = (performance.now() - t0) / 1000;
            break;
          }
          await sleep(POLL_MS);
        }
        if (allDoneS === null) notes.push("not all runs finished (or were listed) before --scenario-timeout");
        if (sliceQuirk) notes.push("run list paging slices [offset, limit) instead of [offset, offset+limit) (JS server quirk); worked around");

        const counts = new Map<string, number>();
        for (const id of runIds) {
          const s = statuses.get(id) ?? "missing";
          counts.set(s, (counts.get(s) ?? 0) + 1);
        }
        const success = counts.get("success") ?? 0;
        if (success < runIds.length) {
          const other = [...counts].filter(([s]) => s !== "success").map(([s, n]) => `${s}=${n}`);
          notes.push(`runs not "success": ${other.join(", ")}`);
        }
        return {
          metrics: [
            metric("total", allDoneS, "s"),
            metric("runs_per_s", allDoneS !== null && allDoneS > 0 ? runIds.length / allDoneS : null, "runs/s"),
            metric("created", runIds.length, "runs"),
            metric("create_phase", createdS, "s"),
            metric("creates_per_s", createdS > 0 ? runIds.length / createdS : null, "creates/s"),
            ...latencyMetrics(summarize(createLatency.toArray()), "create_").slice(0, 2),
            metric("join_last", joinS, "s"),
            metric("success", success, "runs"),
            metric("all_success", runIds.length === o.enqueueRuns && success === runIds.length, "bool"),
          ],
          errors: errors.report(),
          notes,
        };
      },
      { idleTimeoutMs: ctx.options.scenarioTimeoutMs },
    ),
};
