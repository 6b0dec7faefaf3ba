// What every module of the LMDB checkpointer works on: the env, the serde, the saver's blob cache
// and the write queue shared by every saver of the env in this JS thread; and the key shapes.
import type { Checkpoint } from "@langchain/langgraph-checkpoint";
import type { Storage, StoredChannelVersion } from "../env.ts";
import type { BlobCache } from "./blob-cache.ts";
import type { MessageCachingSerde } from "./message-serde.ts";
import type { CheckpointWriteQueue } from "./write-queue.ts";

export interface LmdbSaverContext {
  readonly storage: Storage;
  /** the saver's serde: the graph's serializer wrapped in MessageCachingSerde */
  readonly serde: MessageCachingSerde;
  /** decoded message-list blobs of this saver */
  readonly blobCache: BlobCache;
  /** queued checkpoint writes of this env, shared by every saver on it in this JS thread */
  readonly queue: CheckpointWriteQueue;
}

/** [thread, ns, checkpoint id] */
export type CheckpointKey = [string, string, string];
/** [thread, ns, channel, version, tag] */
export type BlobKey = [string, string, string, StoredChannelVersion, string];
export type StoredCheckpointBody = Omit<Checkpoint, "channel_values">;

/** Sorts after every key element (ordered-binary): [...prefix, MAX_KEY] ends a prefix range. */
export const MAX_KEY = new Uint8Array([0xff]);
