// What the LMDB checkpointer knows of a thread's latest root checkpoint while its write is still
// queued, so the thread's next run can read it without waiting for the commit (lmdb-saver.ts):
// the view a put leaves, and the tuple a read gets from it.
/*
 * Why: put/putWrites resolve once their transaction is queued, and a read of the thread waits for
 * those writes to commit (read-your-writes). The next run on a thread starts by reading its latest
 * checkpoint, so without this view every run on a busy thread waited for the previous run's commit.
 *
 * The view holds what the read would return, in the form the read would rebuild it from: the
 * serialized checkpoint body, metadata and pending writes (deserialized again on each read, as
 * from LMDB), and per channel either the serialized value, the list itself for a message list
 * (what the blob cache would hand out, by the same rules), or a pointer to a blob that is
 * already committed. It is only kept while it is certainly the thread's latest root checkpoint:
 * built from a put whose parent it knows, dropped by any other kind of write and once the thread's
 * queued writes have all committed (then LMDB is the truth again).
 */
import type { ChannelVersions, Checkpoint, CheckpointTuple } from "@langchain/langgraph-checkpoint";
import type { StoredChannelVersion } from "../env.ts";
import { loadChannelValue, NO_VALUE, tagOf, type EncodedBlob } from "./blob-store.ts";
import { MAX_KEY, type LmdbSaverContext } from "./lmdb-context.ts";
import { joinChunks } from "./message-chunks.ts";
import type { TagMap } from "./queued-writes.ts";
import { tupleFromSerialized, type StoredPendingWrite } from "./tuple.ts";

/** One channel of a pending checkpoint. */
export type PendingChannel =
  /** a message list (or list of primitives): handed out as a shallow copy, as the blob cache does */
  | { version: StoredChannelVersion; list: unknown[] }
  /** the serde's bytes of the value */
  | { version: StoredChannelVersion; type: string; bytes: Uint8Array }
  /** a blob already committed under this tag (see lmdb-saver.ts) */
  | { version: StoredChannelVersion; storedTag: string }
  /** no value (the put wrote no blob for it) */
  | { version: StoredChannelVersion; absent: true };

/** A pending write as the pending view keeps it: as both savers store it. */
export type PendingWriteRecord = StoredPendingWrite;

export interface PendingCheckpoint {
  id: string;
  parentId: string | null;
  bodyType: string;
  body: Uint8Array;
  metadataType: string;
  metadata: Uint8Array;
  channels: Map<string, PendingChannel>;
  /** pending writes put on this checkpoint since it was put, by `${taskId}\u0000${idx}` */
  writes: Map<string, PendingWriteRecord>;
}

/** The key of a write in PendingCheckpoint.writes. */
export function pendingWriteKey(taskId: string, idx: number): string {
  return `${taskId}\u0000${idx}`;
}

/** Records writes on a pending checkpoint by the same rules as the writes DB (first wins for regular writes). */
export function addPendingWrites(target: Pick<PendingCheckpoint, "writes">, records: PendingWriteRecord[]): void {
  for (const record of records) {
    const key = pendingWriteKey(record.taskId, record.idx);
    if (record.idx >= 0 && target.writes.has(key)) continue;
    target.writes.set(key, record);
  }
}

/**
 * The pending view of a root checkpoint being put, or undefined when it cannot be known for
 * certain to be the thread's latest with every channel accounted for (then reads wait for the
 * commit, as for any other write).
 */
export function pendingAfterPut(
  ctx: LmdbSaverContext,
  threadId: string,
  parentId: string | null,
  parentTags: TagMap | undefined | null,
  checkpoint: Checkpoint,
  newVersions: ChannelVersions,
  changed: string[],
  blobs: EncodedBlob[],
  lists: (unknown[] | undefined)[],
  [bodyType, body]: [string, Uint8Array],
  [metadataType, metadata]: [string, Uint8Array],
  queued: boolean,
): PendingCheckpoint | undefined {
  if (checkpoint.v < 4) return undefined; // older formats need migratePendingSends on read
  const previous = ctx.queue.pending.get(threadId);
  if (queued && previous === undefined) return undefined; // queued writes of unknown effect
  if (previous !== undefined && checkpoint.id <= previous.id) return undefined; // not the newest (or a re-put)
  if (!queued && !isNewest(ctx, threadId, checkpoint.id)) return undefined;
  const changedAt = new Map(changed.map((channel, i) => [channel, i]));
  const fromParent = previous !== undefined && previous.id === parentId ? previous : undefined;
  const channels = new Map<string, PendingChannel>();
  for (const channel in checkpoint.channel_versions) {
    if (!Object.hasOwn(checkpoint.channel_versions, channel)) continue;
    const version = checkpoint.channel_versions[channel];
    const i = changedAt.get(channel);
    if (i !== undefined) {
      channels.set(channel, pendingChannelOf(version, lists[i], blobs[i]));
      continue;
    }
    if (Object.hasOwn(newVersions, channel)) {
      channels.set(channel, { version, absent: true }); // a new version without a value: no blob
      continue;
    }
    const inherited = fromParent?.channels.get(channel);
    if (inherited !== undefined && inherited.version === version) {
      channels.set(channel, inherited);
      continue;
    }
    // the value may sit in a write that has not committed, or the parent's tags are not known
    if (queued || parentTags === null) return undefined;
    channels.set(channel, { version, storedTag: tagOf(parentTags, channel, version) });
  }
  return {
    id: checkpoint.id,
    parentId,
    bodyType,
    body,
    metadataType,
    metadata,
    channels,
    writes: new Map(),
  };
}

/** Whether `id` sorts after every committed root checkpoint of the thread (false when that cannot be read). */
function isNewest({ storage }: LmdbSaverContext, threadId: string, id: string): boolean {
  try {
    for (const key of storage.checkpoints.getKeys({ start: [threadId, "", MAX_KEY], end: [threadId, ""], reverse: true, limit: 1 })) {
      if (key[2] >= id) return false;
    }
    return true;
  } catch {
    return false; // e.g. a thread id too long for a key: the write fails and reports it, as usual
  }
}

/** The tuple getTuple would return for a pending checkpoint once its writes commit. */
export async function pendingTuple(ctx: LmdbSaverContext, threadId: string, pending: PendingCheckpoint): Promise<CheckpointTuple> {
  const { serde } = ctx;
  const values: Record<string, unknown> = {};
  for (const [channel, entry] of pending.channels) {
    if ("list" in entry) values[channel] = entry.list.slice();
    else if ("bytes" in entry) values[channel] = await serde.loadsTyped(entry.type, entry.bytes);
    else if ("storedTag" in entry) {
      const value = await loadChannelValue(ctx, threadId, "", channel, entry.version, entry.storedTag);
      if (value !== NO_VALUE) values[channel] = value;
    }
  }
  return tupleFromSerialized(serde, threadId, pending, values, [...pending.writes.values()]);
}

/**
 * How a pending checkpoint holds a channel value it was put with: the put's private copy of the
 * list where the blob cache keeps it too (so a read hands out what a read after the commit would),
 * else the serde's bytes, revived on each read.
 */
function pendingChannelOf(version: StoredChannelVersion, list: unknown[] | undefined, encoded: EncodedBlob): PendingChannel {
  if (list !== undefined) return { version, list };
  if (encoded.blob.chunks === undefined) return { version, type: encoded.blob.type, bytes: encoded.blob.value };
  return {
    version,
    type: encoded.blob.type,
    bytes: joinChunks(
      encoded.chunks.map((c) => c.bytes),
      encoded.blob.value,
    ),
  };
}
