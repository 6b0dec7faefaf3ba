// Messages between the main thread and a client worker thread (`--client-workers`).
import type { ErrorReport } from "../error-tally.ts";
import type { ClientKind } from "../http/types.ts";
import type { LoopPlan } from "./closed-loop.ts";
import type { LoopSpec } from "./loops.ts";

export interface WorkerInput {
  spec: LoopSpec;
  plan: LoopPlan;
  clientKind: ClientKind;
  baseUrl: string;
  /** every server of `--url` (requests go to each in turn) */
  baseUrls: string[];
  idleTimeoutMs: number;
}

/** Main → worker: begin the loop (sent once every worker reported ready, so shards start together). */
export interface StartMessage {
  type: "start";
}

/** Worker → main. */
export type WorkerMessage =
  | { type: "ready" }
  | { type: "result"; completed: number; elapsedMs: number; latenciesMs: Float64Array; errors: ErrorReport }
  | { type: "error"; message: string; stack: string };
