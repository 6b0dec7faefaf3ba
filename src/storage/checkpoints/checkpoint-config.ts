// What every checkpoint saver reads from a RunnableConfig and a metadata filter, the same way
// for both backends (lmdb-saver.ts, postgres/checkpointer.ts).
import type { RunnableConfig } from "@langchain/core/runnables";
import type { CheckpointMetadata } from "@langchain/langgraph-checkpoint";
import { TroupeError } from "../../errors.ts";

export function threadIdOf(config: RunnableConfig): string | undefined {
  const threadId: unknown = config.configurable?.thread_id;
  if (typeof threadId === "string" && threadId !== "") return threadId;
  if (typeof threadId === "number") return String(threadId);
  return undefined;
}

export function requireThreadId(config: RunnableConfig, action: string): string {
  const threadId = threadIdOf(config);
  if (threadId === undefined) throw new TroupeError("BAD_REQUEST", `cannot ${action}: configurable.thread_id is missing`);
  return threadId;
}

export function namespaceOf(config: RunnableConfig): string {
  const ns: unknown = config.configurable?.checkpoint_ns;
  return typeof ns === "string" ? ns : "";
}

/** The run a checkpoint or write belongs to: metadata.run_id, else the config's. */
export function runIdOf(metadata: CheckpointMetadata | undefined, config: RunnableConfig): string | null {
  const candidates: unknown[] = [(metadata as Record<string, unknown> | undefined)?.run_id, config.metadata?.run_id, config.configurable?.run_id];
  for (const candidate of candidates) if (typeof candidate === "string" && candidate !== "") return candidate;
  return null;
}

/** list()'s filter: every key of the filter equal (by value) to the metadata's. */
export function matchesFilter(metadata: CheckpointMetadata, filter: Record<string, unknown>): boolean {
  const record = metadata as Record<string, unknown>;
  for (const key in filter) if (!deepEqual(record[key], filter[key])) return false;
  return true;
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const aRecord = a as Record<string, unknown>;
  const bRecord = b as Record<string, unknown>;
  const aKeys = Object.keys(aRecord);
  if (aKeys.length !== Object.keys(bRecord).length) return false;
  return aKeys.every((key) => Object.hasOwn(bRecord, key) && deepEqual(aRecord[key], bRecord[key]));
}

/**
 * The configurable key naming one execution of a run started before its create committed
 * (PostgreSQL): its writes are refused for good once that create failed
 * (ThreadCheckpointOps.refuseExecution), however late the graph still sends them.
 */
export const EXECUTION_KEY = "__troupe_execution";

export function executionOf(config: RunnableConfig): string | undefined {
  const e = config.configurable?.[EXECUTION_KEY];
  return typeof e === "string" ? e : undefined;
}
