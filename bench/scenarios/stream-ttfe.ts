// stream-ttfe: sequential create-and-stream runs on fresh threads; time from sending the request
// to the first complete SSE event, which must be `metadata`; every stream is read to its end.
import { performance } from "node:perf_hooks";
import { createThread, expectOk, runBody } from "../api.ts";
import { BenchCheckError, ErrorTally } from "../error-tally.ts";
import { SampleBuffer, summarize } from "../stats.ts";
import { withDeadline } from "./deadline.ts";
import { latencyMetrics, metric } from "./metrics.ts";
import { completeEvents, eventName } from "./sse.ts";
import type { Scenario, ScenarioOutcome } from "./types.ts";

export const streamTtfeScenario: Scenario = {
  name: "stream-ttfe",
  describe: (o) => `${o.streamRuns} sequential POST /threads/{id}/runs/stream (${o.echoGraph}): time to first SSE event`,
  run: (ctx) =>
    withDeadline(ctx, async ({ client, expired }): Promise<ScenarioOutcome> => {
      const o = ctx.options;
      const body = JSON.stringify(runBody(o.echoGraph));
      const ttfe = new SampleBuffer();
      const total = new SampleBuffer();
      const errors = new ErrorTally();
      let events = 0;
      let attempted = 0;
      for (let i = 0; i < o.streamRuns && !expired(); i++) {
        attempted++;
        try {
          const threadId = await createThread(client);
          const req = client.prepare("POST", `/threads/${threadId}/runs/stream`, body);
          let seen = "";
          let firstAt = -1;
          let first = "";
          const t0 = performance.now();
          const res = await client.request(req, {
            onChunk: (chunk) => {
              if (firstAt >= 0) return;
              seen += chunk.toString("latin1");
              const { events: done } = completeEvents(seen);
              if (done.length > 0) {
                firstAt = performance.now();
                first = done[0];
              }
            },
          });
          const end = performance.now();
          expectOk(res);
          const type = res.headers["content-type"] ?? "";
          if (!type.includes("text/event-stream")) throw new BenchCheckError("not an SSE response", type);
          if (firstAt < 0) throw new BenchCheckError("empty stream", "no complete SSE event");
          if (eventName(first) !== "metadata") throw new BenchCheckError("first event not metadata", first.slice(0, 200));
          const all = completeEvents(res.body.toString("utf8")).events;
          const errorEvent = all.find((e) => eventName(e) === "error");
          if (errorEvent !== undefined) throw new BenchCheckError("error event", errorEvent.slice(0, 200));
          events += all.length;
          ttfe.push(firstAt - t0);
          total.push(end - t0);
        } catch (err) {
          errors.addThrown(err);
        }
      }
      const notes: string[] = [];
      if (attempted < o.streamRuns) notes.push(`stopped by --scenario-timeout after ${attempted} of ${o.streamRuns} runs`);
      return {
        metrics: [
          ...latencyMetrics(summarize(ttfe.toArray()), "ttfe_"),
          metric("stream_total_p50", summarize(total.toArray()).p50Ms, "ms"),
          metric("stream_total_p99", summarize(total.toArray()).p99Ms, "ms"),
          metric("events_per_stream", ttfe.length > 0 ? events / ttfe.length : null, "events"),
          metric("completed", ttfe.length, "runs"),
        ],
        errors: errors.report(),
        notes,
      };
    }),
};
