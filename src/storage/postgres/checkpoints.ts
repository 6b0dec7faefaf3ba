// The checkpoints family on Postgres: PostgresCheckpointSaver on the storage's pool and per-thread
// write chains, optionally with a hook on each put's metadata (as lmdb/checkpoints.ts). Loaded on
// first use (it pulls LangGraph's checkpoint library).
import type { RunnableConfig } from "@langchain/core/runnables";
import type { ChannelVersions, Checkpoint, CheckpointMetadata } from "@langchain/langgraph-checkpoint";
import type { CheckpointSaverOptions, CheckpointSavers } from "../port.ts";
import { PostgresCheckpointSaver } from "./checkpointer.ts";
import type { PostgresDb } from "./pool.ts";
import type { ThreadWriteChains } from "./write-chains.ts";

type PutMetadata = NonNullable<CheckpointSaverOptions["putMetadata"]>;

class HookedPostgresSaver extends PostgresCheckpointSaver {
  constructor(
    db: PostgresDb,
    opts: CheckpointSaverOptions,
    chains: ThreadWriteChains,
    private readonly putMetadata: PutMetadata,
  ) {
    super(db, opts.serde, chains);
  }

  override put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    return super.put(config, checkpoint, this.putMetadata(config, metadata), newVersions);
  }
}

export function postgresCheckpointSavers(db: PostgresDb, chains: ThreadWriteChains): CheckpointSavers {
  return {
    saver: (opts = {}) =>
      opts.putMetadata ? new HookedPostgresSaver(db, opts, chains, opts.putMetadata) : new PostgresCheckpointSaver(db, opts.serde, chains),
  };
}
