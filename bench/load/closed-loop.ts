// Closed-loop load: `concurrency` virtual users each issue the next iteration as soon as the
// previous one finishes, for a warm-up then a measured window. Only the window is recorded.
import { performance } from "node:perf_hooks";
import { ErrorTally, type ErrorReport } from "../error-tally.ts";
import { SampleBuffer } from "../stats.ts";

/** One unit of work; resolves with the latency (ms) to record, throws to count an error. */
export type Iteration = () => Promise<number>;

export interface LoopPlan {
  concurrency: number;
  warmupMs: number;
  durationMs: number;
}

export interface LoopResult {
  /** Iterations started inside the measured window that succeeded. */
  completed: number;
  /** From the start of the window until the last started iteration finished. */
  elapsedMs: number;
  latenciesMs: Float64Array;
  errors: ErrorReport;
}

export async function runClosedLoop(iteration: Iteration, plan: LoopPlan): Promise<LoopResult> {
  const latencies = new SampleBuffer();
  const errors = new ErrorTally();
  const start = performance.now();
  const measureFrom = start + plan.warmupMs;
  const stopAt = measureFrom + plan.durationMs;

  const user = async (): Promise<void> => {
    for (;;) {
      const t = performance.now();
      if (t >= stopAt) return;
      const measured = t >= measureFrom;
      try {
        const ms = await iteration();
        if (measured) latencies.push(ms);
      } catch (err) {
        if (measured) errors.addThrown(err);
      }
    }
  };
  await Promise.all(Array.from({ length: plan.concurrency }, user));
  const elapsedMs = Math.max(0, performance.now() - measureFrom);
  return { completed: latencies.length, elapsedMs, latenciesMs: latencies.toArray(), errors: errors.report() };
}
