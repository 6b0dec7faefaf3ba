// The checkpointer graphs run with in the server: LmdbCheckpointSaver plus the run's metadata in
// every checkpoint's metadata, as LangGraph Platform stores it (reference §2.4): the run config's
// `metadata` (graph_id, assistant_id, run_id, thread_id, the run's and thread's own metadata) and
// every configurable key except LangGraph's internal ones (`__…`) and the checkpoint address. So
// a thread's state and history show which run wrote each checkpoint, and history filters on
// `metadata` find them (`{run_id}`, `{graph_id}`, a key the run's metadata carried).
import type { RunnableConfig } from "@langchain/core/runnables";
import type { ChannelVersions, Checkpoint, CheckpointMetadata } from "@langchain/langgraph-checkpoint";
import { LmdbCheckpointSaver } from "../storage/checkpoints/lmdb-saver.ts";
import type { ThreadCheckpointOps } from "../storage/port.ts";

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

export class RunCheckpointSaver extends LmdbCheckpointSaver {
  override put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    return super.put(config, checkpoint, runCheckpointMetadata(config, metadata), newVersions);
  }
}

/** The whole-thread checkpoint operations a thread actor uses (ShardContext.saver), on a saver. */
export function threadCheckpointOps(saver: LmdbCheckpointSaver): ThreadCheckpointOps {
  return {
    deleteThread: (t) => saver.deleteThread(t),
    copyThread: (a, b) => saver.copyThread(a, b),
    deleteCheckpointsOfRun: async (t, r) => void (await saver.deleteCheckpointsOfRun(t, r)),
    hasCheckpointOfRun: async (t, r) => saver.hasCheckpointOfRun(t, r),
    hasCheckpoint: (t, ns, id) => saver.hasCheckpoint(t, ns, id),
    patchMetadata: (t, patch, id) => saver.patchMetadata(t, patch, id),
    pruneToLatest: (t) => saver.pruneToLatest(t),
    holdWritesUntil: (t, until) => saver.holdWritesUntil(t, until),
  };
}
