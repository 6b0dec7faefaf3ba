// Channel values in LMDB: one blob per channel version (`blobs`, with a stamp in `blob_stamps` for
// the blob cache), long message lists as shared chunks plus a tail (`blob_chunks`), and the fork
// tags that keep two branches' values apart when they reuse a version number.
/*
 * - blobs [thread, ns, channel, version, tag]: one value per channel version, written by the put
 *   whose newVersions names it. getTuple rebuilds channel_values from channel_versions.
 * - A version number is only unique along one branch: a fork (update_state / run from an older
 *   checkpoint) can write another value under a version that already exists. Such a put stores
 *   the blob under tag = its checkpoint id and records channel -> [version, tag] in the record's
 *   `tags`; children inherit the tag while the version is unchanged. Otherwise the tag is "".
 */
import type { ChannelVersions, Checkpoint } from "@langchain/langgraph-checkpoint";
import { TroupeError } from "../../errors.ts";
import type { Storage, StoredBlob, StoredChannelVersion } from "../env.ts";
import { BlobCache } from "./blob-cache.ts";
import type { RemovedSlots } from "./chunk-gc.ts";
import type { BlobKey, LmdbSaverContext } from "./lmdb-context.ts";
import { joinChunks, type MessageChunk } from "./message-chunks.ts";
import type { MessageCachingSerde } from "./message-serde.ts";
import type { TagMap } from "./queued-writes.ts";

/** A channel value ready to store: the blob record plus the chunks it references (to write if new). */
export interface EncodedBlob {
  blob: StoredBlob;
  chunks: MessageChunk[];
  /** bytes of the whole value (chunks + tail), for the cache's cost estimate */
  byteLength: number;
}

/** loadChannelValue's answer for a channel that has no stored value. */
export const NO_VALUE = Symbol("no value");

/** A channel value as stored: chunked when it is a long message list, else the serde's bytes. */
export async function encodeBlob(serde: MessageCachingSerde, value: unknown): Promise<EncodedBlob> {
  const chunked = await serde.dumpsChunked(value);
  if (chunked !== undefined) {
    return { blob: { type: "json", value: chunked.tail, chunks: chunked.chunks.map((c) => c.id) }, chunks: chunked.chunks, byteLength: chunked.byteLength };
  }
  const [type, bytes] = await serde.dumpsTyped(value);
  return { blob: { type, value: bytes }, chunks: [], byteLength: bytes.byteLength };
}

/** The serde bytes of a stored blob: chunked ones are reassembled from their chunks. */
export function blobBytes(storage: Storage, threadId: string, ns: string, channel: string, blob: StoredBlob): Uint8Array {
  if (blob.chunks === undefined) return blob.value;
  const parts = blob.chunks.map((id) => {
    const bytes = storage.blobChunks.get([threadId, ns, channel, id]);
    if (bytes === undefined)
      throw new TroupeError("INTERNAL", `checkpoint data of thread ${threadId} is damaged: chunk ${id} of channel "${channel}" is missing`);
    return bytes;
  });
  return joinChunks(parts, blob.value);
}

/** Writes a blob with a fresh stamp (inside a write transaction); returns the stamp. */
export function putBlobSync(storage: Storage, key: BlobKey, blob: StoredBlob): number {
  const stamp = newStamp();
  storage.blobs.putSync(key, blob);
  storage.blobStamps.putSync(key, stamp);
  return stamp;
}

/**
 * Removes a blob and its stamp (inside a write transaction). With `removedSlots`, the blob's slot
 * is recorded there so chunks it may have named can be collected afterwards (collectChunksSync;
 * recording every slot avoids reading each removed blob to learn whether it was chunked).
 */
export function removeBlobSync(storage: Storage, key: BlobKey, removedSlots?: RemovedSlots): void {
  removedSlots?.add(key[1], key[2]);
  storage.blobs.removeSync(key);
  storage.blobStamps.removeSync(key);
}

export async function loadChannelValues(
  ctx: LmdbSaverContext,
  threadId: string,
  ns: string,
  versions: ChannelVersions,
  tags: TagMap | undefined,
): Promise<Record<string, unknown>> {
  const values: Record<string, unknown> = {};
  for (const channel in versions) {
    if (!Object.hasOwn(versions, channel)) continue;
    const version = versions[channel];
    const value = await loadChannelValue(ctx, threadId, ns, channel, version, tagOf(tags, channel, version));
    if (value !== NO_VALUE) values[channel] = value;
  }
  return values;
}

/** One stored channel value (from the blob cache when it holds this very write), or NO_VALUE. */
export async function loadChannelValue(
  { storage, blobCache, serde }: LmdbSaverContext,
  threadId: string,
  ns: string,
  channel: string,
  version: StoredChannelVersion,
  tag: string,
): Promise<unknown> {
  const blobKey: BlobKey = [threadId, ns, channel, version, tag];
  const cacheKey = BlobCache.key(threadId, ns, channel, version, tag);
  // a hit checks the blob's small stamp only: the (possibly large) bytes are not read
  if (blobCache.has(cacheKey)) {
    const cached = blobCache.get(cacheKey, storage.blobStamps.get(blobKey));
    if (cached !== undefined) return cached;
  }
  const blob = storage.blobs.get(blobKey);
  if (blob === undefined) return NO_VALUE;
  const bytes = blobBytes(storage, threadId, ns, channel, blob);
  // read together with the bytes (no await between): the stamp of the write they came from
  const stamp = blobCache.accepts(bytes.byteLength) ? storage.blobStamps.get(blobKey) : undefined;
  const value: unknown = await serde.loadsTyped(blob.type, bytes);
  if (stamp !== undefined) blobCache.fill(cacheKey, threadId, stamp, bytes.byteLength, value);
  return value;
}

/** Tags a child keeps from its parent: channels it did not rewrite and whose version is unchanged. */
export function inheritedTags(parentTags: TagMap | undefined, checkpoint: Checkpoint, newVersions: ChannelVersions): TagMap {
  const tags: TagMap = {};
  if (parentTags === undefined) return tags;
  for (const channel in parentTags) {
    const tagged = parentTags[channel];
    if (!Object.hasOwn(newVersions, channel) && checkpoint.channel_versions[channel] === tagged[0]) tags[channel] = tagged;
  }
  return tags;
}

/** The channel value of `channel` at `version`: its branch tag, or "" for the plain value. */
export function tagOf(tags: TagMap | undefined, channel: string, version: unknown): string {
  const tagged = tags?.[channel];
  return tagged !== undefined && tagged[0] === version ? tagged[1] : "";
}

/** LMDB's largest key is 1,978 bytes: keys made of these parts (plus small numbers) stay well below. */
export function fitsInKey(...parts: string[]): boolean {
  let bytes = 0;
  for (const part of parts) bytes += Buffer.byteLength(part) + 8;
  return bytes <= 1_600;
}

/** A random token identifying one blob write (53 bits: exact as a JS number and in msgpack). */
export function newStamp(): number {
  return Math.floor(Math.random() * Number.MAX_SAFE_INTEGER);
}

/** A blob's identity within its thread: [ns, channel, version, tag]. */
export function blobId(ns: string, channel: string, version: StoredChannelVersion, tag: string): string {
  return JSON.stringify([ns, channel, version, tag]);
}
