// The run's metadata in every checkpoint's metadata, as LangGraph Platform stores it (reference
// §2.4): the run config's `metadata` (graph_id, assistant_id, run_id, thread_id, the run's and
// thread's own metadata) and every configurable key except LangGraph's internal ones (`__…`) and
// the checkpoint address. So a thread's state and history show which run wrote each checkpoint,
// and history filters on `metadata` find them (`{run_id}`, `{graph_id}`, a key the run's metadata
// carried). The savers graphs run with apply it to each put (CheckpointSaverOptions.putMetadata).
import type { RunnableConfig } from "@langchain/core/runnables";
import type { CheckpointMetadata } from "@langchain/langgraph-checkpoint";

/** configurable keys that address the checkpoint rather than describe the run (as upstream) */
const ADDRESS_KEYS = new Set(["checkpoint_ns", "checkpoint_id", "run_id", "thread_id"]);

/** Checkpoint metadata with the run's keys under it: configurable, then config.metadata, then LangGraph's own (later wins). */
export function runCheckpointMetadata(config: RunnableConfig, metadata: CheckpointMetadata): CheckpointMetadata {
  const merged: Record<string, unknown> = {};
  const configurable = config.configurable ?? {};
  for (const key of Object.keys(configurable)) {
    if (!key.startsWith("__") && !ADDRESS_KEYS.has(key)) merged[key] = configurable[key];
  }
  Object.assign(merged, config.metadata, metadata);
  return merged as CheckpointMetadata;
}
