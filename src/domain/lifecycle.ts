// Run lifecycle and thread status rules in one place (reference §6.4–§6.7), pure functions so
// they are unit-tested directly and used by the actor.
import { TroupeError } from "../errors.ts";
import { deepEqual } from "../util/deep-equal.ts";

export { deepEqual };
import type { Json, JsonObject, MultitaskStrategy, RunStatus, RunnableConfigJson, ThreadStatus } from "../storage/records.ts";

export interface FinishedRunFacts {
  outcome: "success" | "error" | "interrupted";
  /** the thread's latest checkpoint has nodes left to run (interrupt() or interrupt_before/after) */
  hasNext: boolean;
  /** runs still queued on the thread after this one */
  queued: number;
}

/** Thread status once a run ends. Queued work wins: the next run starts at once. */
export function threadStatusAfterRun(f: FinishedRunFacts): ThreadStatus {
  if (f.queued > 0) return "busy";
  if (f.outcome === "error") return "error";
  // a cancelled run leaves the thread idle even if it stopped mid-graph (upstream behaviour)
  if (f.outcome === "interrupted") return "idle";
  return f.hasNext ? "interrupted" : "idle";
}

export const REJECT_MESSAGE = "Thread is already running a task. Wait for it to finish or choose a different multitask strategy.";

export type InflightAction = "none" | "cancel-interrupt" | "cancel-rollback";

/** What creating a run does to the runs already in flight on its thread. Throws for reject. */
export function multitaskDecision(strategy: MultitaskStrategy, hasInflight: boolean): InflightAction {
  if (!hasInflight) return "none";
  switch (strategy) {
    case "reject":
      throw new TroupeError("MULTITASK_REJECTED", REJECT_MESSAGE);
    case "interrupt":
      return "cancel-interrupt";
    case "rollback":
      return "cancel-rollback";
    case "enqueue":
      return "none";
  }
}

export const isFinal = (s: RunStatus): boolean => s === "success" || s === "error" || s === "interrupted" || s === "timeout";

export const MAX_ATTEMPTS = 3;

// ---- stops -----------------------------------------------------------------------------
// A stop answered 2xx (a cancel, or a run created with multitask_strategy interrupt/rollback) is
// committed with its reply as the run's `cancel_reason`, so it survives a crash and readers see
// it at once; the run keeps its status until it has actually stopped.

/** What a stop does to a run: end it `interrupted`, or also discard it (run and checkpoints). */
export type StopAction = "interrupt" | "rollback";

/** The stop recorded on a run (its cancel_reason), if any. */
export function stopActionOf(run: { cancel_reason?: string | null }): StopAction | undefined {
  const reason = run.cancel_reason;
  if (!reason) return undefined;
  return reason === "rollback" ? "rollback" : "interrupt";
}

/**
 * The stop to record when `requested` arrives for a run that already carries `recorded`: the first
 * stop is recorded, a rollback upgrades an interrupt, anything else adds nothing (undefined).
 */
export function stopToRecord(recorded: StopAction | undefined, requested: StopAction): StopAction | undefined {
  if (recorded === undefined) return requested;
  return recorded === "interrupt" && requested === "rollback" ? "rollback" : undefined;
}

/** The parts of a run's outcome a stop decides. */
export interface StoppableOutcome {
  status: "success" | "error" | "interrupted";
  rolledBack: boolean;
  error?: { error: string; message: string };
}

/**
 * A run's outcome once a stop was accepted before its outcome was fixed: the stop wins over
 * whatever the graph did after it (the reply promised it), so the run ends `interrupted`, and a
 * rollback discards it even if the graph reached its end first.
 */
export function outcomeAfterStop<O extends StoppableOutcome>(outcome: O, stop: StopAction | undefined): O {
  if (stop === undefined) return outcome;
  const { error: _error, ...rest } = outcome;
  return { ...rest, status: "interrupted", rolledBack: stop === "rollback" } as O;
}

/**
 * What recovery does with a run found pending or running after a restart: a recorded stop is
 * carried out (never resumed), a run that crashed the server MAX_ATTEMPTS times ends `error`, a
 * running one resumes from its last checkpoint, a pending one is queued again.
 */
export type RecoveryPlan = "stop" | "give-up" | "resume" | "requeue";

export function recoveryPlan(run: { status: RunStatus; attempt: number; cancel_reason?: string | null }): RecoveryPlan {
  if (stopActionOf(run) !== undefined) return "stop";
  if (run.status !== "running") return "requeue";
  return run.attempt >= MAX_ATTEMPTS ? "give-up" : "resume";
}

/** Merge configs the way upstream does: later wins, `configurable` merged key by key. */
export function mergeConfigs(...configs: (RunnableConfigJson | undefined)[]): RunnableConfigJson {
  const out: RunnableConfigJson = {};
  let configurable: JsonObject | undefined;
  for (const c of configs) {
    if (!c) continue;
    for (const [k, v] of Object.entries(c)) {
      if (k === "configurable") configurable = { ...configurable, ...(v as JsonObject) };
      else if (v !== undefined) out[k] = v;
    }
  }
  if (configurable) out.configurable = configurable;
  return out;
}

/** configurable keys that address one checkpoint: a run's own choice, never the thread's */
const CHECKPOINT_ADDRESS = ["checkpoint_id", "checkpoint_ns", "checkpoint_map"] as const;

/**
 * The config a thread keeps after a run (what later runs and state reads start from): the merged
 * configs without the checkpoint address a run may have named. Kept, a fork's checkpoint_id made
 * every later run fork from that same checkpoint again (upstream does, a bug we do not copy).
 */
export function threadConfigAfter(...configs: (RunnableConfigJson | undefined)[]): RunnableConfigJson {
  const merged = mergeConfigs(...configs);
  if (merged.configurable) for (const key of CHECKPOINT_ADDRESS) delete merged.configurable[key];
  return merged;
}

/**
 * A run's context (the graph's `context`): the assistant's context with the run's keys over it,
 * as upstream merges them. A non-object assistant context (a string, a number) is taken as it is.
 */
export function mergeContexts(assistantContext: Json | undefined, runContext: Json | undefined): Json | undefined {
  if (assistantContext === undefined || assistantContext === null) return runContext;
  if (typeof assistantContext !== "object") return assistantContext;
  if (!isPlainRecord(assistantContext)) return runContext ?? assistantContext;
  return isPlainRecord(runContext) ? { ...assistantContext, ...runContext } : (runContext ?? assistantContext);
}

const isPlainRecord = (v: Json | undefined): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Metadata containment filter (reference §4.1): every key of the filter must be present and
 * equal; nested objects match recursively; arrays compare by value (upstream compares by
 * identity and never matches: a bug we do not copy).
 */
export function matchesFilter(filter: unknown, value: unknown): boolean {
  if (filter === null || typeof filter !== "object" || Array.isArray(filter)) return deepEqual(filter, value);
  if (value === null || typeof value !== "object") return false;
  for (const [k, f] of Object.entries(filter as Record<string, unknown>)) {
    const v = (value as Record<string, unknown>)[k];
    if (v === undefined || v === null) return false;
    if (f !== null && typeof f === "object" && !Array.isArray(f)) {
      if (!matchesFilter(f, v)) return false;
    } else if (!deepEqual(f, v)) return false;
  }
  return true;
}
