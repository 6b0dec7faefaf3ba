// The checkpoints family on LMDB: LmdbCheckpointSaver (storage/checkpoints/), optionally with a
// hook on each put's metadata. Loaded on first use (it pulls LangGraph's checkpoint library).
import type { RunnableConfig } from "@langchain/core/runnables";
import type { ChannelVersions, Checkpoint, CheckpointMetadata } from "@langchain/langgraph-checkpoint";
import type { Storage } from "../env.ts";
import { LmdbCheckpointSaver } from "../checkpoints/lmdb-saver.ts";
import type { CheckpointSaverOptions, CheckpointSavers } from "../port.ts";

type PutMetadata = NonNullable<CheckpointSaverOptions["putMetadata"]>;

class HookedLmdbSaver extends LmdbCheckpointSaver {
  constructor(
    storage: Storage,
    opts: CheckpointSaverOptions,
    private readonly putMetadata: PutMetadata,
  ) {
    super(storage, opts.serde);
  }

  override put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    return super.put(config, checkpoint, this.putMetadata(config, metadata), newVersions);
  }
}

export function lmdbCheckpointSavers(storage: Storage): CheckpointSavers {
  return {
    saver: (opts = {}) => (opts.putMetadata ? new HookedLmdbSaver(storage, opts, opts.putMetadata) : new LmdbCheckpointSaver(storage, opts.serde)),
  };
}
