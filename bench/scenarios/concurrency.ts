// The fixed-concurrency, fixed-duration scenarios (ok, thread-create, wait-c*, stateless-wait):
// a closed loop in-process, or sharded over client worker threads with --client-workers.
import { runClosedLoop, type LoopResult } from "../load/closed-loop.ts";
import { buildIteration, type LoopKind } from "../load/loops.ts";
import { runShardedLoop } from "../load/sharded-loop.ts";
import type { ScenarioName } from "../options.ts";
import { summarize } from "../stats.ts";
import { latencyMetrics, metric } from "./metrics.ts";
import type { Scenario, ScenarioContext, ScenarioOutcome } from "./types.ts";

async function runLoop(ctx: ScenarioContext, kind: LoopKind, concurrency: number): Promise<LoopResult> {
  const o = ctx.options;
  const spec = { kind, echoGraph: o.echoGraph };
  const plan = { concurrency, warmupMs: o.warmupMs, durationMs: o.durationMs };
  if (o.clientWorkers <= 1) return runClosedLoop(buildIteration(spec, ctx.client), plan);
  return runShardedLoop(spec, plan, {
    workers: o.clientWorkers,
    clientKind: o.client,
    baseUrl: o.url,
    baseUrls: o.urls,
    idleTimeoutMs: o.idleTimeoutMs,
  });
}

function closedLoopScenario(name: ScenarioName, kind: LoopKind, concurrency: number, unit: string, what: (echoGraph: string) => string): Scenario {
  return {
    name,
    describe: (o) => `${what(o.echoGraph)} at concurrency ${concurrency} for ${o.durationMs / 1000} s`,
    async run(ctx): Promise<ScenarioOutcome> {
      const r = await runLoop(ctx, kind, concurrency);
      const seconds = r.elapsedMs / 1000;
      return {
        metrics: [
          metric("throughput", seconds > 0 ? r.completed / seconds : null, unit),
          ...latencyMetrics(summarize(r.latenciesMs)),
          metric("completed", r.completed, "count"),
          metric("concurrency", concurrency, "conns"),
        ],
        errors: r.errors,
        notes: [],
      };
    },
  };
}

export const okScenario = closedLoopScenario("ok", "ok", 64, "req/s", () => "GET /ok");
export const threadCreateScenario = closedLoopScenario("thread-create", "thread-create", 16, "creates/s", () => "POST /threads");

const waitWhat = (g: string): string => `POST /threads + POST /threads/{id}/runs/wait (${g}; latency = wait only)`;
export const waitC1Scenario = closedLoopScenario("wait-c1", "thread-wait", 1, "runs/s", waitWhat);
export const waitC16Scenario = closedLoopScenario("wait-c16", "thread-wait", 16, "runs/s", waitWhat);
export const waitC64Scenario = closedLoopScenario("wait-c64", "thread-wait", 64, "runs/s", waitWhat);
export const statelessWaitScenario = closedLoopScenario("stateless-wait", "stateless-wait", 16, "runs/s", (g) => `POST /runs/wait (${g})`);
