// Checkpoint operations on whole threads and runs, beyond BaseCheckpointSaver (the port's
// ThreadCheckpointOps) on LMDB: delete, copy, prune to the latest, rollback of a run, existence
// checks and a metadata patch. Each first waits for the thread's queued writes.
import { TroupeError } from "../../errors.ts";
import type { StoredBlobRef, StoredCheckpoint } from "../env.ts";
import { BlobCache } from "./blob-cache.ts";
import { blobId, putBlobSync, removeBlobSync } from "./blob-store.ts";
import { adoptBlobsSync, blobsNamedBy, collectChunksSync, RemovedSlots, removingChunks } from "./chunk-gc.ts";
import { MAX_KEY, type CheckpointKey, type LmdbSaverContext } from "./lmdb-context.ts";

/**
 * Shallow-merges `patch` into the metadata of a thread's latest root checkpoint (or of
 * `checkpointId`); returns false when the thread has no such checkpoint. Channel values and
 * writes are untouched.
 */
export async function patchMetadata(
  { storage, serde, queue }: LmdbSaverContext,
  threadId: string,
  patch: Record<string, unknown>,
  checkpointId?: string,
): Promise<boolean> {
  await queue.flush(threadId);
  queue.pending.delete(threadId);
  let key: CheckpointKey | undefined;
  let record: StoredCheckpoint | undefined;
  if (checkpointId) {
    key = [threadId, "", checkpointId];
    record = storage.checkpoints.get(key);
  } else {
    for (const e of storage.checkpoints.getRange({ start: [threadId, "", MAX_KEY], end: [threadId, ""], reverse: true, limit: 1 })) {
      key = e.key;
      record = e.value;
    }
  }
  if (!key || !record) return false;
  const metadata = (await serde.loadsTyped(record.metadataType, record.metadata)) as Record<string, unknown>;
  const [metadataType, bytes] = await serde.dumpsTyped({ ...metadata, ...patch });
  const k = key;
  await storage.root.transaction(() => {
    const current = storage.checkpoints.get(k);
    if (current) storage.checkpoints.putSync(k, { ...current, metadataType, metadata: bytes });
  });
  return true;
}

export async function deleteThread({ storage, blobCache, queue }: LmdbSaverContext, threadId: string): Promise<void> {
  await queue.flush(threadId).catch(() => undefined); // the thread's data goes either way
  const { checkpoints, writes, blobs } = storage;
  const range = { start: [threadId], end: [threadId, MAX_KEY] };
  blobCache.removeThread(threadId);
  queue.pending.delete(threadId);
  await removingChunks(queue, threadId, () =>
    storage.root.transaction(() => {
      for (const key of Array.from(checkpoints.getKeys(range))) checkpoints.removeSync(key);
      for (const key of Array.from(writes.getKeys(range))) writes.removeSync(key);
      for (const key of Array.from(blobs.getKeys(range))) removeBlobSync(storage, key);
      for (const key of Array.from(storage.blobChunks.getKeys(range))) storage.blobChunks.removeSync(key);
    }),
  );
}

/**
 * Duplicates every checkpoint, pending write and channel blob of `fromThreadId` under
 * `toThreadId` (which should be empty), rewriting metadata.thread_id where present.
 */
export async function copyThread({ storage, serde, queue }: LmdbSaverContext, fromThreadId: string, toThreadId: string): Promise<void> {
  if (fromThreadId === toThreadId) throw new TroupeError("BAD_REQUEST", "copyThread needs two different thread ids");
  await queue.flush(fromThreadId);
  const { checkpoints, writes, blobs } = storage;
  const range = { start: [fromThreadId], end: [fromThreadId, MAX_KEY] };
  const copied = await Promise.all(
    Array.from(checkpoints.getRange(range)).map(async ({ key, value }) => {
      const metadata: unknown = await serde.loadsTyped(value.metadataType, value.metadata);
      if (metadata === null || typeof metadata !== "object" || !("thread_id" in metadata)) return { key, value };
      const [metadataType, bytes] = await serde.dumpsTyped({ ...metadata, thread_id: toThreadId });
      return { key, value: { ...value, metadataType, metadata: bytes } };
    }),
  );
  const copiedWrites = Array.from(writes.getRange(range));
  const copiedBlobs = Array.from(blobs.getRange(range));
  const copiedChunks = Array.from(storage.blobChunks.getRange(range));
  queue.pending.delete(toThreadId);
  await storage.root.transaction(() => {
    for (const { key, value } of copied) checkpoints.putSync([toThreadId, key[1], key[2]], value);
    for (const { key, value } of copiedWrites) writes.putSync([toThreadId, key[1], key[2], key[3], key[4]], value);
    for (const { key, value } of copiedBlobs) putBlobSync(storage, [toThreadId, key[1], key[2], key[3], key[4]], value);
    for (const { key, value } of copiedChunks) storage.blobChunks.putSync([toThreadId, key[1], key[2], key[3]], value);
  });
}

/**
 * Prune strategy keep_latest: keeps the newest checkpoint of every namespace of the thread
 * (its pending writes and the channel values it references) and removes everything older.
 * The kept checkpoints lose their parent link. Returns how many checkpoints went.
 */
export async function pruneToLatest({ storage, serde, queue }: LmdbSaverContext, threadId: string): Promise<number> {
  await queue.flush(threadId);
  queue.pending.delete(threadId);
  const { checkpoints, writes, blobs } = storage;
  const range = { start: [threadId], end: [threadId, MAX_KEY] };
  const latestByNs = new Map<string, CheckpointKey>();
  for (const key of checkpoints.getKeys(range)) latestByNs.set(key[1], key); // ascending: the last one wins
  const latest = [...latestByNs.values()].flatMap((key) => {
    const value = checkpoints.get(key);
    return value === undefined ? [] : [{ key, value }];
  });
  const liveBlobs = await blobsNamedBy(serde, latest);
  const kept = (ns: string, id: string) => latestByNs.get(ns)?.[2] === id;
  // the cache is left as is: kept blobs keep their stamps (their entries are what the next run
  // reads), removed ones lose theirs, so no stale entry can be served
  return removingChunks(queue, threadId, () =>
    storage.root.transaction(() => {
      let removed = 0;
      for (const key of Array.from(checkpoints.getKeys(range))) {
        if (!kept(key[1], key[2])) {
          checkpoints.removeSync(key);
          removed += 1;
          continue;
        }
        const record = checkpoints.get(key);
        if (record === undefined) continue;
        // the only checkpoint left in its namespace owns every stored blob it names (some were
        // created by checkpoints removed here)
        const owned: StoredBlobRef[] = [];
        for (const heir of liveBlobs.values()) {
          if (heir.key[1] === key[1] && heir.key[2] === key[2] && blobs.doesExist([threadId, key[1], ...heir.ref])) owned.push(heir.ref);
        }
        checkpoints.putSync(key, { ...record, parentId: null, blobs: owned });
      }
      for (const key of Array.from(writes.getKeys(range))) if (!kept(key[1], key[2])) writes.removeSync(key);
      const removedSlots = new RemovedSlots();
      for (const key of Array.from(blobs.getKeys(range))) {
        if (!liveBlobs.has(blobId(key[1], key[2], key[3], key[4]))) removeBlobSync(storage, key, removedSlots);
      }
      collectChunksSync(storage, threadId, removedSlots);
      return removed;
    }),
  );
}

/** Whether the thread has that checkpoint (its queued writes included), without reading its values. */
export async function hasCheckpoint({ storage, queue }: LmdbSaverContext, threadId: string, ns: string, checkpointId: string): Promise<boolean> {
  const pending = ns === "" ? queue.pending.get(threadId) : undefined;
  if (pending !== undefined && pending.id === checkpointId && queue.byThread.has(threadId)) return true;
  await queue.flush(threadId);
  return storage.checkpoints.doesExist([threadId, ns, checkpointId]);
}

/** Whether any checkpoint of the thread was written by the run (crash recovery: resume vs replay). */
export async function hasCheckpointOfRun({ storage, queue }: LmdbSaverContext, threadId: string, runId: string): Promise<boolean> {
  await queue.flush(threadId);
  for (const { value } of storage.checkpoints.getRange({ start: [threadId], end: [threadId, MAX_KEY] })) {
    if (value.runId === runId) return true;
  }
  return false;
}

/**
 * Rollback: removes the thread's checkpoints whose run id (metadata.run_id, else the put
 * config's metadata.run_id) is `runId`, with their writes and the blobs they created, plus
 * writes the run left on surviving checkpoints (e.g. resume writes). Returns how many
 * checkpoints went.
 */
export async function deleteCheckpointsOfRun({ storage, serde, blobCache, queue }: LmdbSaverContext, threadId: string, runId: string): Promise<number> {
  await queue.flush(threadId);
  queue.pending.delete(threadId);
  const { checkpoints, writes } = storage;
  const range = { start: [threadId], end: [threadId, MAX_KEY] };
  // A blob the run created stays while a surviving checkpoint still names its version (e.g. the
  // next run's input checkpoint, when the run deleted is not the thread's latest). Only a
  // checkpoint put after the run's first one in its namespace can name such a blob (ids are
  // time-ordered), so rolling back the latest run decodes nothing.
  const all = Array.from(checkpoints.getRange(range));
  const firstOfRun = new Map<string, string>();
  for (const { key, value } of all) if (value.runId === runId && !firstOfRun.has(key[1])) firstOfRun.set(key[1], key[2]);
  const laterSurvivors = all.filter(({ key, value }) => {
    const first = firstOfRun.get(key[1]);
    return value.runId !== runId && first !== undefined && key[2] > first;
  });
  const liveBlobs = await blobsNamedBy(serde, laterSurvivors);
  return removingChunks(queue, threadId, () =>
    storage.root.transaction(() => {
      let removed = 0;
      const removedSlots = new RemovedSlots();
      const inherited: { key: CheckpointKey; ref: StoredBlobRef }[] = [];
      for (const { key, value } of Array.from(checkpoints.getRange(range))) {
        if (value.runId !== runId) continue;
        removed += 1;
        checkpoints.removeSync(key);
        for (const writeKey of Array.from(writes.getKeys({ start: key, end: [...key, MAX_KEY] }))) writes.removeSync(writeKey);
        for (const [channel, version, tag] of value.blobs) {
          const heir = liveBlobs.get(blobId(key[1], channel, version, tag));
          if (heir !== undefined) {
            inherited.push(heir);
            continue;
          }
          removeBlobSync(storage, [threadId, key[1], channel, version, tag], removedSlots);
          blobCache.remove(BlobCache.key(threadId, key[1], channel, version, tag));
        }
      }
      adoptBlobsSync(storage, threadId, inherited);
      for (const { key, value } of Array.from(writes.getRange(range))) if (value.runId === runId) writes.removeSync(key);
      collectChunksSync(storage, threadId, removedSlots);
      return removed;
    }),
  );
}
