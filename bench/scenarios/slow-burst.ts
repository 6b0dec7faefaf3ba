// slow-200: one fresh thread per run (created first, not timed), then every runs/wait of the
// slow graph fired at once; the wall time shows how many sleeping runs the server overlaps.
import { performance } from "node:perf_hooks";
import { createThread, expectRunOutput, runBody } from "../api.ts";
import { ErrorTally } from "../error-tally.ts";
import { SampleBuffer, summarize } from "../stats.ts";
import { withDeadline } from "./deadline.ts";
import { latencyMetrics, metric } from "./metrics.ts";
import type { Scenario, ScenarioOutcome } from "./types.ts";

const THREAD_CREATE_CONCURRENCY = 16;

export const slowBurstScenario: Scenario = {
  name: "slow-200",
  describe: (o) => `${o.slowRuns} concurrent POST /threads/{id}/runs/wait (${o.slowGraph}, sleep_ms ${o.slowSleepMs})`,
  run: (ctx) =>
    withDeadline(ctx, async ({ client, expired }): Promise<ScenarioOutcome> => {
      const o = ctx.options;
      const errors = new ErrorTally();
      const threads: string[] = [];
      let next = 0;
      const creator = async (): Promise<void> => {
        while (next < o.slowRuns && !expired()) {
          next++;
          try {
            threads.push(await createThread(client));
          } catch (err) {
            errors.addThrown(err);
          }
        }
      };
      await Promise.all(Array.from({ length: THREAD_CREATE_CONCURRENCY }, creator));

      const body = JSON.stringify(runBody(o.slowGraph, { sleepMs: o.slowSleepMs }));
      const latency = new SampleBuffer();
      const t0 = performance.now();
      await Promise.all(
        threads.map(async (threadId) => {
          const t = performance.now();
          try {
            expectRunOutput(await client.request(client.prepare("POST", `/threads/${threadId}/runs/wait`, body)));
            latency.push(performance.now() - t);
          } catch (err) {
            errors.addThrown(err);
          }
        }),
      );
      const totalS = (performance.now() - t0) / 1000;
      const notes: string[] = [];
      if (threads.length < o.slowRuns) notes.push(`only ${threads.length} of ${o.slowRuns} threads could be created`);
      if (expired()) notes.push("stopped by --scenario-timeout; total is not comparable");
      return {
        metrics: [
          metric("total", totalS, "s"),
          metric("ideal", o.slowSleepMs / 1000, "s"),
          ...latencyMetrics(summarize(latency.toArray())).slice(0, 2),
          metric("completed", latency.length, "runs"),
        ],
        errors: errors.report(),
        notes,
      };
    }),
};
