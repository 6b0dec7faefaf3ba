// stream-join: sequential joins of a running run's stream. Each iteration creates a thread, starts
// a background run on the slow graph (--join-sleep-ms, so it is still running) and joins its stream
// with GET /threads/{id}/runs/{run_id}/stream: time from the join request to its first complete SSE
// event (the run's events so far are sent first), and the stream read to its end. With three
// --url servers in turn the three requests of an iteration go to three different servers, so the
// join reaches a node that does not run the run: the cross-node stream path of a cluster
// (docs/CLUSTER.md, "Run events to subscribers on other nodes").
import { performance } from "node:perf_hooks";
import { createBackgroundRun, createThread, expectOk, runBody } from "../api.ts";
import { BenchCheckError, ErrorTally } from "../error-tally.ts";
import { SampleBuffer, summarize } from "../stats.ts";
import { withDeadline } from "./deadline.ts";
import { latencyMetrics, metric } from "./metrics.ts";
import { completeEvents, eventName } from "./sse.ts";
import type { Scenario, ScenarioOutcome } from "./types.ts";

export const streamJoinScenario: Scenario = {
  name: "stream-join",
  describe: (o) =>
    `${o.streamRuns} sequential joins (GET /threads/{id}/runs/{run_id}/stream) of a running ${o.slowGraph} run (sleep ${o.joinSleepMs} ms): time to first SSE event`,
  run: (ctx) =>
    withDeadline(ctx, async ({ client, expired }): Promise<ScenarioOutcome> => {
      const o = ctx.options;
      const body = runBody(o.slowGraph, { sleepMs: o.joinSleepMs });
      const ttfe = new SampleBuffer();
      const errors = new ErrorTally();
      let attempted = 0;
      for (let i = 0; i < o.streamRuns && !expired(); i++) {
        attempted++;
        try {
          const threadId = await createThread(client);
          const runId = await createBackgroundRun(client, threadId, body);
          let seen = "";
          let firstAt = -1;
          const t0 = performance.now();
          const res = await client.request(client.prepare("GET", `/threads/${threadId}/runs/${runId}/stream`), {
            onChunk: (chunk) => {
              if (firstAt >= 0) return;
              seen += chunk.toString("latin1");
              if (completeEvents(seen).events.length > 0) firstAt = performance.now();
            },
          });
          expectOk(res);
          if (firstAt < 0) throw new BenchCheckError("empty stream", "no complete SSE event");
          const errorEvent = completeEvents(res.body.toString("utf8")).events.find((e) => eventName(e) === "error");
          if (errorEvent !== undefined) throw new BenchCheckError("error event", errorEvent.slice(0, 200));
          ttfe.push(firstAt - t0);
        } catch (err) {
          errors.addThrown(err);
        }
      }
      const notes: string[] = [];
      if (attempted < o.streamRuns) notes.push(`stopped by --scenario-timeout after ${attempted} of ${o.streamRuns} runs`);
      if (o.urls.length === 3) notes.push("three servers in turn: every join went to a server other than the one running the run");
      return { metrics: [...latencyMetrics(summarize(ttfe.toArray()), "ttfe_"), metric("completed", ttfe.length, "runs")], errors: errors.report(), notes };
    }),
};
