// What removing checkpoints leaves behind: message-list chunks no remaining blob names are removed
// in the same transaction, and blobs a surviving checkpoint still names change owner instead of
// going (rollback, run delete, prune, thread delete: thread-ops.ts).
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";
import type { Storage, StoredBlobRef, StoredCheckpoint } from "../env.ts";
import { blobId, tagOf } from "./blob-store.ts";
import { MAX_KEY, type CheckpointKey, type StoredCheckpointBody } from "./lmdb-context.ts";
import type { CheckpointWriteQueue } from "./write-queue.ts";

/** The (namespace, channel) slots of a thread whose blobs a transaction removed. */
export class RemovedSlots {
  private readonly slots = new Map<string, [string, string]>();

  add(ns: string, channel: string): void {
    this.slots.set(JSON.stringify([ns, channel]), [ns, channel]);
  }

  values(): IterableIterator<[string, string]> {
    return this.slots.values();
  }
}

/**
 * Runs a transaction that may remove chunks of the thread: what is known stored of it is
 * forgotten before and after, so no put skips a chunk the transaction removed.
 */
export async function removingChunks<T>(queue: CheckpointWriteQueue, threadId: string, remove: () => Promise<T>): Promise<T> {
  queue.storedChunks.forget(threadId);
  try {
    return await remove();
  } finally {
    queue.storedChunks.forget(threadId);
  }
}

/**
 * Every blob the records name (by blobId), with the first of them (in the order given) that
 * names it: the record that takes the blob over when its creator goes.
 */
export async function blobsNamedBy(
  serde: SerializerProtocol,
  records: Iterable<{ key: CheckpointKey; value: StoredCheckpoint }>,
): Promise<Map<string, { key: CheckpointKey; ref: StoredBlobRef }>> {
  const named = new Map<string, { key: CheckpointKey; ref: StoredBlobRef }>();
  for (const { key, value } of records) {
    const body = (await serde.loadsTyped(value.type, value.checkpoint)) as StoredCheckpointBody;
    for (const [channel, version] of Object.entries(body.channel_versions ?? {})) {
      const tag = tagOf(value.tags, channel, version);
      const id = blobId(key[1], channel, version, tag);
      if (!named.has(id)) named.set(id, { key, ref: [channel, version, tag] });
    }
  }
  return named;
}

/**
 * Inside a write transaction: each blob in `heirs` is listed as created by its heir checkpoint,
 * so whoever later removes that checkpoint removes the blob too (a blob whose creator was
 * removed while others still name it would otherwise be owned by no record until the thread goes).
 */
export function adoptBlobsSync(storage: Storage, threadId: string, heirs: Iterable<{ key: CheckpointKey; ref: StoredBlobRef }>): void {
  const byHeir = new Map<string, { key: CheckpointKey; refs: StoredBlobRef[] }>();
  for (const { key, ref } of heirs) {
    if (!storage.blobs.doesExist([threadId, key[1], ...ref])) continue;
    const id = `${key[1]}\u0000${key[2]}`;
    const entry = byHeir.get(id);
    if (entry) entry.refs.push(ref);
    else byHeir.set(id, { key, refs: [ref] });
  }
  for (const { key, refs } of byHeir.values()) {
    const record = storage.checkpoints.get(key);
    if (record === undefined) continue;
    const owned = new Set(record.blobs.map(([c, v, t]) => blobId(key[1], c, v, t)));
    const adopted = refs.filter(([c, v, t]) => !owned.has(blobId(key[1], c, v, t)));
    if (adopted.length > 0) storage.checkpoints.putSync(key, { ...record, blobs: [...record.blobs, ...adopted] });
  }
}

/** Inside the write transaction that removed blobs: removes their slots' chunks no remaining blob names. */
export function collectChunksSync(storage: Storage, threadId: string, slots: RemovedSlots): void {
  for (const [ns, channel] of slots.values()) {
    const range = { start: [threadId, ns, channel], end: [threadId, ns, channel, MAX_KEY] };
    if (storage.blobChunks.getKeysCount({ ...range, limit: 1 }) === 0) continue; // never chunked
    const named = new Set<string>();
    for (const { value } of storage.blobs.getRange(range)) for (const id of value.chunks ?? []) named.add(id);
    for (const key of Array.from(storage.blobChunks.getKeys(range))) if (!named.has(key[3])) storage.blobChunks.removeSync(key);
  }
}
