// LangGraph checkpointer on the shared LMDB env. Channel values live in the `blobs` DB keyed by
// [thread, ns, channel, version], so each step stores only the channels it changed.
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver, TASKS, WRITES_IDX_MAP, compareWritesSortKeys, getCheckpointId, maxChannelVersion, writesSortKey,
  type ChannelVersions, type Checkpoint, type CheckpointListOptions, type CheckpointMetadata,
  type CheckpointPendingWrite, type CheckpointTuple, type PendingWrite, type SerializerProtocol,
} from "@langchain/langgraph-checkpoint";
import { TroupeError } from "../../errors.ts";
import { matchesFilter, namespaceOf, requireThreadId, runIdOf, threadIdOf } from "./checkpoint-config.ts";
import { BlobCache } from "./blob-cache.ts";
import { MessageCachingSerde } from "./message-serde.ts";
import { joinChunks, type MessageChunk } from "./message-chunks.ts";
import { QueuedThreadWrites, type TagMap } from "./queued-writes.ts";
import { StoredChunks } from "./stored-chunks.ts";
import { addPendingWrites, pendingWriteKey, type PendingChannel, type PendingCheckpoint, type PendingWriteRecord } from "./pending-checkpoints.ts";
import type { Storage, StoredBlob, StoredBlobRef, StoredChannelVersion, StoredCheckpoint, StoredWrite } from "../env.ts";

/*
 * Storage contract
 * - checkpoints [thread, ns, id]: the checkpoint serialised WITHOUT channel_values, plus metadata.
 * - blobs [thread, ns, channel, version, tag]: one value per channel version, written by the put
 *   whose newVersions names it. getTuple rebuilds channel_values from channel_versions.
 * - A version number is only unique along one branch: a fork (update_state / run from an older
 *   checkpoint) can write another value under a version that already exists. Such a put stores
 *   the blob under tag = its checkpoint id and records channel -> [version, tag] in `tags`;
 *   children inherit the tag while the version is unchanged. Otherwise the tag is "".
 * - writes [thread, ns, id, task, idx]: pending writes, returned in writesSortKey order.
 * put/putWrites resolve once their transaction is queued, not when it commits: LangGraph awaits
 *   every checkpoint write of a run, and waiting for lmdb-js' batched commits doubled a short run's
 *   latency. lmdb-js commits transactions in the order they were queued, so a run's checkpoints
 *   always commit before (or with) the actor's final run-status transaction queued after them; a
 *   crash in between loses only checkpoints of a run that is still `running`, which recovery
 *   re-executes. Reads of a thread first wait for its queued writes (read-your-writes), and a
 *   failed write is reported by the next read of or write to that thread (and by flush()). The
 *   one exception is the read every run starts with, of the thread's latest root checkpoint: while
 *   that checkpoint's write is queued it is answered from what put/putWrites were given
 *   (pending-checkpoints.ts), so a thread's next run does not wait for the previous run's commit.
 * - blob_chunks [thread, ns, channel, chunk id]: message lists of CHUNK_ITEMS+ messages are stored as
 *   shared, content-addressed chunks plus the blob's own tail (message-chunks.ts), so a long
 *   thread's history does not store its whole list again at every step. Every path that removes
 *   blobs removes the chunks left unreferenced in the same transaction (collectChunksSync).
 * Long threads: the serde is wrapped in MessageCachingSerde (per-message JSON cache on put) and
 * decoded message-list blobs are kept in a BlobCache (filled on put and read, verified against
 * the blob's stored stamp on every hit, so a hit reads no blob bytes), so a run costs O(new messages), not O(history), in (de)serialization.
 */

type CheckpointKey = [string, string, string];
type BlobKey = [string, string, string, StoredChannelVersion, string];
type StoredCheckpointBody = Omit<Checkpoint, "channel_values">;

/** A channel value ready to store: the blob record plus the chunks it references (to write if new). */
interface EncodedBlob {
  blob: StoredBlob;
  chunks: MessageChunk[];
  /** bytes of the whole value (chunks + tail), for the cache's cost estimate */
  byteLength: number;
}

interface WriteQueue {
  /** per thread: the last queued write transaction (resolves when it and every earlier one committed) */
  byThread: Map<string, Promise<void>>;
  /** per thread: a queued write that failed, reported once by the next read, write or flush */
  failed: Map<string, Error>;
  /** per thread: its latest root checkpoint while writes are queued, when known (pending-checkpoints.ts) */
  pending: Map<string, PendingCheckpoint>;
  /** per thread with queued writes: what they write that a put needs to know (queued-writes.ts) */
  queued: Map<string, QueuedThreadWrites>;
  /** per thread: writes queued from now on are handed to lmdb-js only once this settles (holdWritesUntil) */
  barriers: Map<string, Promise<void>>;
  /** message-list chunks known committed, so puts do not write them again (stored-chunks.ts) */
  storedChunks: StoredChunks;
}

/** loadChannelValue's answer for a channel that has no stored value. */
const NO_VALUE = Symbol("no value");

const writeQueues = new WeakMap<object, WriteQueue>();

/** Sorts after every key element (ordered-binary): [...prefix, MAX_KEY] ends a prefix range. */
const MAX_KEY = new Uint8Array([0xff]);
const KEY_CHUNK = 128;

export class LmdbCheckpointSaver extends BaseCheckpointSaver {
  private readonly storage: Storage;
  private readonly messageSerde: MessageCachingSerde;
  private readonly blobCache: BlobCache;
  /** queued checkpoint writes of this env, shared by every saver on it in this JS thread */
  private readonly queue: WriteQueue;

  constructor(storage: Storage, serde?: SerializerProtocol, blobCacheBytes?: number) {
    const messageSerde = serde instanceof MessageCachingSerde ? serde : new MessageCachingSerde(serde);
    super(messageSerde);
    this.messageSerde = messageSerde;
    this.storage = storage;
    this.blobCache = new BlobCache(blobCacheBytes);
    let queue = writeQueues.get(storage.root);
    if (queue === undefined) {
      queue = { byThread: new Map(), failed: new Map(), pending: new Map(), queued: new Map(), barriers: new Map(), storedChunks: new StoredChunks() };
      writeQueues.set(storage.root, queue);
    }
    this.queue = queue;
  }

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const threadId = threadIdOf(config);
    if (threadId === undefined) return undefined;
    const ns = namespaceOf(config);
    const id = getCheckpointId(config);
    const pending = ns === "" ? this.queue.pending.get(threadId) : undefined;
    if (pending !== undefined && (!id || id === pending.id) && this.queue.byThread.has(threadId)) {
      this.throwFailedWrite(threadId);
      return this.pendingTuple(threadId, pending);
    }
    await this.flush(threadId);
    if (id) {
      const key: CheckpointKey = [threadId, ns, id];
      const record = this.storage.checkpoints.get(key);
      return record === undefined ? undefined : this.toTuple(key, record);
    }
    for (const { key, value } of this.storage.checkpoints.getRange({
      start: [threadId, ns, MAX_KEY], end: [threadId, ns], reverse: true, limit: 1,
    })) return this.toTuple(key, value);
    return undefined;
  }

  /**
   * Shallow-merges `patch` into the metadata of a thread's latest root checkpoint (or of
   * `checkpointId`); returns false when the thread has no such checkpoint. Channel values and
   * writes are untouched.
   */
  async patchMetadata(threadId: string, patch: Record<string, unknown>, checkpointId?: string): Promise<boolean> {
    await this.flush(threadId);
    this.queue.pending.delete(threadId);
    let key: CheckpointKey | undefined;
    let record: StoredCheckpoint | undefined;
    if (checkpointId) {
      key = [threadId, "", checkpointId];
      record = this.storage.checkpoints.get(key);
    } else {
      for (const e of this.storage.checkpoints.getRange({ start: [threadId, "", MAX_KEY], end: [threadId, ""], reverse: true, limit: 1 })) {
        key = e.key;
        record = e.value;
      }
    }
    if (!key || !record) return false;
    const metadata = (await this.serde.loadsTyped(record.metadataType, record.metadata)) as Record<string, unknown>;
    const [metadataType, bytes] = await this.serde.dumpsTyped({ ...metadata, ...patch });
    const k = key;
    await this.storage.root.transaction(() => {
      const current = this.storage.checkpoints.get(k);
      if (current) this.storage.checkpoints.putSync(k, { ...current, metadataType, metadata: bytes });
    });
    return true;
  }

  async *list(config: RunnableConfig, options: CheckpointListOptions = {}): AsyncGenerator<CheckpointTuple> {
    const { before, filter } = options;
    let remaining = options.limit ?? Infinity;
    if (remaining <= 0) return;
    const threadId = threadIdOf(config);
    await this.flush(threadId);
    const ns = config.configurable?.checkpoint_ns;
    const onlyId = getCheckpointId(config);
    const beforeId = before === undefined ? "" : getCheckpointId(before);
    const keys = threadId !== undefined && typeof ns === "string"
      ? this.namespaceKeysNewestFirst(threadId, ns, beforeId)
      : this.keysNewestFirst(threadId, typeof ns === "string" ? ns : undefined, beforeId);
    for (const key of keys) {
      if (onlyId && key[2] !== onlyId) continue;
      const record = this.storage.checkpoints.get(key);
      if (record === undefined) continue;
      const metadata = (await this.serde.loadsTyped(record.metadataType, record.metadata)) as CheckpointMetadata;
      if (filter !== undefined && !matchesFilter(metadata, filter)) continue;
      yield await this.toTuple(key, record, metadata);
      if (--remaining <= 0) return;
    }
  }

  async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    const threadId = requireThreadId(config, "put a checkpoint");
    const ns = namespaceOf(config);
    const parentId = getCheckpointId(config) || null;
    const { channel_values: values, ...body } = checkpoint;
    const changed = Object.keys(newVersions).filter((ch) => Object.hasOwn(values, ch) && values[ch] !== undefined);
    const [[type, bytes], [metadataType, metadataBytes], blobs] = await Promise.all([
      this.serde.dumpsTyped(body),
      this.serde.dumpsTyped(metadata),
      Promise.all(changed.map((ch) => this.encodeBlob(values[ch]))),
    ]);
    const runId = runIdOf(metadata, config);
    // the stored record, whichever path below writes it (they differ in how blob refs and tags are known)
    const checkpointRecord = (blobRefs: StoredBlobRef[], tags: TagMap): StoredCheckpoint => {
      const record: StoredCheckpoint = { type, checkpoint: bytes, metadataType, metadata: metadataBytes, parentId, runId, blobs: blobRefs };
      if (Object.keys(tags).length > 0) record.tags = tags;
      return record;
    };
    const { checkpoints, blobs: blobDb, blobChunks, blobStamps } = this.storage;
    const key: CheckpointKey = [threadId, ns, checkpoint.id];
    this.throwFailedWrite(threadId);
    // Decided before queueing (whether earlier writes are still queued is part of both questions):
    // whether the record can be written without reading LMDB in the transaction, and the pending view.
    const queued = this.queue.byThread.has(threadId);
    const queuedWrites = this.queuedWritesOf(threadId);
    // (no resetReadTxn needed for the reads below: they concern this thread's own writes, and
    // lmdb-js renews its read snapshot whenever one of this JS thread's commits resolves)
    const parentTags = this.knownParentTags(threadId, ns, parentId, queuedWrites);
    const readFree = parentTags !== null && fitsInKey(threadId, ns, checkpoint.id) &&
      changed.every((ch) => fitsInKey(threadId, ns, ch) && this.isUnusedVersion(threadId, ns, ch, newVersions[ch], queuedWrites));
    const tags = readFree ? inheritedTags(parentTags, checkpoint, newVersions) : undefined;
    // One private copy of each list value the blob cache keeps, taken now and shared by the cache and
    // the pending view on either write path (both only hand out copies of it): a long thread's list
    // is copied once per put, not twice.
    // (A chunked list holds only LangChain messages: MessageCachingSerde.dumpsChunked chunks nothing else.)
    const lists = changed.map((ch, i) => (this.blobCache.wouldKeep(blobs[i].byteLength, values[ch], blobs[i].blob.chunks !== undefined) ? values[ch].slice() : undefined));
    const pending = ns === "" ? this.pendingAfterPut(threadId, parentId, parentTags, checkpoint, newVersions, changed, blobs, lists, [type, bytes], [metadataType, metadataBytes], queued) : undefined;
    queuedWrites.noteCheckpoint(ns, checkpoint.id, tags);
    for (const ch of changed) queuedWrites.noteBlob(ns, ch, newVersions[ch]);
    if (tags !== undefined) {
      // every changed channel gets a new plain blob: nothing to read, so lmdb-js' write thread runs it alone
      const stamps = changed.map((ch, i) => {
        const stamp = newStamp();
        const list = lists[i];
        if (list !== undefined) this.blobCache.setOwned(BlobCache.key(threadId, ns, ch, newVersions[ch], ""), threadId, stamp, blobs[i].byteLength, list);
        return stamp;
      });
      const record = checkpointRecord(changed.map((ch): StoredBlobRef => [ch, newVersions[ch], ""]), tags);
      const storedChunks = this.queue.storedChunks;
      const knownChunks = blobs.some((b) => b.chunks.length > 0) ? storedChunks.of(threadId) : undefined;
      const written = this.queueWrite(threadId, "batch", () => {
        changed.forEach((ch, i) => {
          for (const chunk of blobs[i].chunks) {
            if (knownChunks?.has(ns, ch, chunk.id)) continue; // committed by an earlier put
            const chunkKey: [string, string, string, string] = [threadId, ns, ch, chunk.id];
            void blobChunks.ifNoExists(chunkKey, () => void blobChunks.put(chunkKey, chunk.bytes));
          }
          const blobKey: BlobKey = [threadId, ns, ch, newVersions[ch], ""];
          void blobDb.put(blobKey, blobs[i].blob);
          void blobStamps.put(blobKey, stamps[i]);
        });
        void checkpoints.put(key, record);
      });
      if (knownChunks !== undefined) {
        void written.then(() => {
          changed.forEach((ch, i) => {
            const ids = blobs[i].blob.chunks;
            if (ids !== undefined) storedChunks.noteCommitted(threadId, knownChunks, ns, ch, ids);
          });
        }, () => undefined); // a failed write is reported through the queue
      }
    } else {
      this.queueWrite(threadId, "transaction", () => {
        const tags = inheritedTags(parentId === null ? undefined : checkpoints.get([threadId, ns, parentId])?.tags, checkpoint, newVersions);
        let previous: StoredCheckpoint | undefined | null = null; // null: not read yet
        const created: StoredBlobRef[] = [];
        changed.forEach((ch, i) => {
          const version = newVersions[ch];
          let tag = "";
          if (blobDb.doesExist([threadId, ns, ch, version, ""])) {
            // Reuse "" only if this very checkpoint created it (a re-put); otherwise it is another branch's value.
            if (previous === null) previous = checkpoints.get(key);
            const ownsPlain = previous?.blobs.some(([c, v, t]) => c === ch && v === version && t === "") ?? false;
            if (!ownsPlain) {
              tag = checkpoint.id;
              tags[ch] = [version, tag];
            }
          }
          for (const chunk of blobs[i].chunks) {
            const chunkKey: [string, string, string, string] = [threadId, ns, ch, chunk.id];
            if (!blobChunks.doesExist(chunkKey)) blobChunks.putSync(chunkKey, chunk.bytes);
          }
          const stamp = this.putBlobSync([threadId, ns, ch, version, tag], blobs[i].blob);
          const list = lists[i];
          if (list !== undefined) this.blobCache.setOwned(BlobCache.key(threadId, ns, ch, version, tag), threadId, stamp, blobs[i].byteLength, list);
          created.push([ch, version, tag]);
        });
        const record = checkpointRecord(created, tags);
        checkpoints.putSync(key, record);
        queuedWrites.settleTags(ns, checkpoint.id, tags); // a child put from now on needs no read
      });
    }
    if (pending !== undefined) this.queue.pending.set(threadId, pending);
    else if (ns === "") this.queue.pending.delete(threadId);
    return { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpoint.id } };
  }

  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    const threadId = requireThreadId(config, "put writes");
    const checkpointId = getCheckpointId(config);
    if (!checkpointId) throw new TroupeError("BAD_REQUEST", "putWrites needs configurable.checkpoint_id");
    if (writes.length === 0) return;
    const ns = namespaceOf(config);
    const serialized = await Promise.all(writes.map(([, value]) => this.serde.dumpsTyped(value)));
    const runId = runIdOf(undefined, config);
    const db = this.storage.writes;
    this.throwFailedWrite(threadId);
    const pending = ns === "" ? this.queue.pending.get(threadId) : undefined;
    // While its checkpoint is pending, the pending view holds every write put on it (the id is new
    // with the put, and whatever removes writes drops the view): first-wins is decided here, and
    // the writes go to LMDB as plain puts instead of conditional ones (two write instructions each).
    let known: boolean[] | undefined;
    if (pending !== undefined && pending.id === checkpointId) {
      known = writes.map(([channel], i) => pending.writes.has(pendingWriteKey(taskId, WRITES_IDX_MAP[channel] ?? i)));
      addPendingWrites(pending, writes.map(([channel], i): PendingWriteRecord => ({
        taskId, idx: WRITES_IDX_MAP[channel] ?? i, channel, type: serialized[i][0], value: serialized[i][1], taskPath: taskPath ?? "",
      })));
    }
    // Conditional puts need no read on this thread: a batch, unless a key may be too long (then the
    // transaction fails as a whole instead of a batch failing half-written).
    const mode = fitsInKey(threadId, ns, checkpointId, taskId) ? "batch" : "transaction";
    this.queueWrite(threadId, mode, () => {
      writes.forEach(([channel], i) => {
        const idx = WRITES_IDX_MAP[channel] ?? i;
        const key: [string, string, string, string, number] = [threadId, ns, checkpointId, taskId, idx];
        const [type, value] = serialized[i];
        const record: StoredWrite = { channel, type, value, taskPath: taskPath ?? "", runId };
        // Regular writes are first-wins (a retried task must not replace them); special ones (errors, interrupts) overwrite.
        if (idx < 0 || known?.[i] === false) void db.put(key, record);
        else if (known === undefined) void db.ifNoExists(key, () => void db.put(key, record));
      });
    });
  }

  async deleteThread(threadId: string): Promise<void> {
    await this.flush(threadId).catch(() => undefined); // the thread's data goes either way
    const { checkpoints, writes, blobs } = this.storage;
    const range = { start: [threadId], end: [threadId, MAX_KEY] };
    this.blobCache.removeThread(threadId);
    this.queue.pending.delete(threadId);
    await this.removingChunks(threadId, () => this.storage.root.transaction(() => {
      for (const key of Array.from(checkpoints.getKeys(range))) checkpoints.removeSync(key);
      for (const key of Array.from(writes.getKeys(range))) writes.removeSync(key);
      for (const key of Array.from(blobs.getKeys(range))) this.removeBlobSync(key);
      for (const key of Array.from(this.storage.blobChunks.getKeys(range))) this.storage.blobChunks.removeSync(key);
    }));
  }

  /**
   * Duplicates every checkpoint, pending write and channel blob of `fromThreadId` under
   * `toThreadId` (which should be empty), rewriting metadata.thread_id where present.
   */
  async copyThread(fromThreadId: string, toThreadId: string): Promise<void> {
    if (fromThreadId === toThreadId) throw new TroupeError("BAD_REQUEST", "copyThread needs two different thread ids");
    await this.flush(fromThreadId);
    const { checkpoints, writes, blobs } = this.storage;
    const range = { start: [fromThreadId], end: [fromThreadId, MAX_KEY] };
    const copied = await Promise.all(Array.from(checkpoints.getRange(range)).map(async ({ key, value }) => {
      const metadata: unknown = await this.serde.loadsTyped(value.metadataType, value.metadata);
      if (metadata === null || typeof metadata !== "object" || !("thread_id" in metadata)) return { key, value };
      const [metadataType, bytes] = await this.serde.dumpsTyped({ ...metadata, thread_id: toThreadId });
      return { key, value: { ...value, metadataType, metadata: bytes } };
    }));
    const copiedWrites = Array.from(writes.getRange(range));
    const copiedBlobs = Array.from(blobs.getRange(range));
    const copiedChunks = Array.from(this.storage.blobChunks.getRange(range));
    this.queue.pending.delete(toThreadId);
    await this.storage.root.transaction(() => {
      for (const { key, value } of copied) checkpoints.putSync([toThreadId, key[1], key[2]], value);
      for (const { key, value } of copiedWrites) writes.putSync([toThreadId, key[1], key[2], key[3], key[4]], value);
      for (const { key, value } of copiedBlobs) this.putBlobSync([toThreadId, key[1], key[2], key[3], key[4]], value);
      for (const { key, value } of copiedChunks) this.storage.blobChunks.putSync([toThreadId, key[1], key[2], key[3]], value);
    });
  }

  /**
   * Prune strategy keep_latest: keeps the newest checkpoint of every namespace of the thread
   * (its pending writes and the channel values it references) and removes everything older.
   * The kept checkpoints lose their parent link. Returns how many checkpoints went.
   */
  async pruneToLatest(threadId: string): Promise<number> {
    await this.flush(threadId);
    this.queue.pending.delete(threadId);
    const { checkpoints, writes, blobs } = this.storage;
    const range = { start: [threadId], end: [threadId, MAX_KEY] };
    const latestByNs = new Map<string, CheckpointKey>();
    for (const key of checkpoints.getKeys(range)) latestByNs.set(key[1], key); // ascending: the last one wins
    const latest = [...latestByNs.values()].flatMap((key) => {
      const value = checkpoints.get(key);
      return value === undefined ? [] : [{ key, value }];
    });
    const liveBlobs = await this.blobsNamedBy(latest);
    const kept = (ns: string, id: string) => latestByNs.get(ns)?.[2] === id;
    // the cache is left as is: kept blobs keep their stamps (their entries are what the next run
    // reads), removed ones lose theirs, so no stale entry can be served
    return this.removingChunks(threadId, () => this.storage.root.transaction(() => {
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
        if (!liveBlobs.has(blobId(key[1], key[2], key[3], key[4]))) this.removeBlobSync(key, removedSlots);
      }
      this.collectChunksSync(threadId, removedSlots);
      return removed;
    }));
  }

  /** Whether the thread has that checkpoint (its queued writes included), without reading its values. */
  async hasCheckpoint(threadId: string, ns: string, checkpointId: string): Promise<boolean> {
    const pending = ns === "" ? this.queue.pending.get(threadId) : undefined;
    if (pending !== undefined && pending.id === checkpointId && this.queue.byThread.has(threadId)) return true;
    await this.flush(threadId);
    return this.storage.checkpoints.doesExist([threadId, ns, checkpointId]);
  }

  /** Whether any checkpoint of the thread was written by the run (crash recovery: resume vs replay). */
  async hasCheckpointOfRun(threadId: string, runId: string): Promise<boolean> {
    await this.flush(threadId);
    for (const { value } of this.storage.checkpoints.getRange({ start: [threadId], end: [threadId, MAX_KEY] })) {
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
  async deleteCheckpointsOfRun(threadId: string, runId: string): Promise<number> {
    await this.flush(threadId);
    this.queue.pending.delete(threadId);
    const { checkpoints, writes } = this.storage;
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
    const liveBlobs = await this.blobsNamedBy(laterSurvivors);
    return this.removingChunks(threadId, () => this.storage.root.transaction(() => {
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
          this.removeBlobSync([threadId, key[1], channel, version, tag], removedSlots);
          this.blobCache.remove(BlobCache.key(threadId, key[1], channel, version, tag));
        }
      }
      this.adoptBlobsSync(threadId, inherited);
      for (const { key, value } of Array.from(writes.getRange(range))) if (value.runId === runId) writes.removeSync(key);
      this.collectChunksSync(threadId, removedSlots);
      return removed;
    }));
  }

  /**
   * Runs a transaction that may remove chunks of the thread: what is known stored of it is
   * forgotten before and after, so no put skips a chunk the transaction removed.
   */
  private async removingChunks<T>(threadId: string, remove: () => Promise<T>): Promise<T> {
    this.queue.storedChunks.forget(threadId);
    try {
      return await remove();
    } finally {
      this.queue.storedChunks.forget(threadId);
    }
  }

  /**
   * Every blob the records name (by blobId), with the first of them (in the order given) that
   * names it: the record that takes the blob over when its creator goes.
   */
  private async blobsNamedBy(records: Iterable<{ key: CheckpointKey; value: StoredCheckpoint }>): Promise<Map<string, { key: CheckpointKey; ref: StoredBlobRef }>> {
    const named = new Map<string, { key: CheckpointKey; ref: StoredBlobRef }>();
    for (const { key, value } of records) {
      const body = (await this.serde.loadsTyped(value.type, value.checkpoint)) as StoredCheckpointBody;
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
  private adoptBlobsSync(threadId: string, heirs: Iterable<{ key: CheckpointKey; ref: StoredBlobRef }>): void {
    const byHeir = new Map<string, { key: CheckpointKey; refs: StoredBlobRef[] }>();
    for (const { key, ref } of heirs) {
      if (!this.storage.blobs.doesExist([threadId, key[1], ...ref])) continue;
      const id = `${key[1]}\u0000${key[2]}`;
      const entry = byHeir.get(id);
      if (entry) entry.refs.push(ref);
      else byHeir.set(id, { key, refs: [ref] });
    }
    for (const { key, refs } of byHeir.values()) {
      const record = this.storage.checkpoints.get(key);
      if (record === undefined) continue;
      const owned = new Set(record.blobs.map(([c, v, t]) => blobId(key[1], c, v, t)));
      const adopted = refs.filter(([c, v, t]) => !owned.has(blobId(key[1], c, v, t)));
      if (adopted.length > 0) this.storage.checkpoints.putSync(key, { ...record, blobs: [...record.blobs, ...adopted] });
    }
  }

  /**
   * Writes of the thread queued from now on are handed to lmdb-js only once `until` settles (they
   * still resolve at once, and reads see them as queued writes). The thread's actor holds them
   * while the previous run's final transaction commits: lmdb-js keeps a transaction open while
   * writes keep arriving, so the next run's checkpoints would otherwise keep that commit waiting
   * until the next run's own turn ends.
   */
  holdWritesUntil(threadId: string, until: Promise<unknown>): void {
    const barrier = until.then(() => undefined, () => undefined);
    this.queue.barriers.set(threadId, barrier);
    void barrier.then(() => {
      if (this.queue.barriers.get(threadId) === barrier) this.queue.barriers.delete(threadId);
    });
  }

  /**
   * Resolves when every write queued for the thread (or for all threads) has committed; rejects
   * with the error of a write that failed since the last report.
   */
  async flush(threadId?: string): Promise<void> {
    if (threadId === undefined) {
      await Promise.all(this.queue.byThread.values());
      const [first] = this.queue.failed.keys();
      if (first !== undefined) this.throwFailedWrite(first);
      return;
    }
    const queued = this.queue.byThread.get(threadId);
    if (queued !== undefined) await queued;
    this.throwFailedWrite(threadId);
  }

  /** A channel value as stored: chunked when it is a long message list, else the serde's bytes. */
  private async encodeBlob(value: unknown): Promise<EncodedBlob> {
    const chunked = await this.messageSerde.dumpsChunked(value);
    if (chunked !== undefined) {
      return { blob: { type: "json", value: chunked.tail, chunks: chunked.chunks.map((c) => c.id) }, chunks: chunked.chunks, byteLength: chunked.byteLength };
    }
    const [type, bytes] = await this.serde.dumpsTyped(value);
    return { blob: { type, value: bytes }, chunks: [], byteLength: bytes.byteLength };
  }

  /** The serde bytes of a stored blob: chunked ones are reassembled from their chunks. */
  private blobBytes(threadId: string, ns: string, channel: string, blob: StoredBlob): Uint8Array {
    if (blob.chunks === undefined) return blob.value;
    const parts = blob.chunks.map((id) => {
      const bytes = this.storage.blobChunks.get([threadId, ns, channel, id]);
      if (bytes === undefined) throw new TroupeError("INTERNAL", `checkpoint data of thread ${threadId} is damaged: chunk ${id} of channel "${channel}" is missing`);
      return bytes;
    });
    return joinChunks(parts, blob.value);
  }

  /** Inside the write transaction that removed blobs: removes their slots' chunks no remaining blob names. */
  private collectChunksSync(threadId: string, slots: RemovedSlots): void {
    for (const [ns, channel] of slots.values()) {
      const range = { start: [threadId, ns, channel], end: [threadId, ns, channel, MAX_KEY] };
      if (this.storage.blobChunks.getKeysCount({ ...range, limit: 1 }) === 0) continue; // never chunked
      const named = new Set<string>();
      for (const { value } of this.storage.blobs.getRange(range)) for (const id of value.chunks ?? []) named.add(id);
      for (const key of Array.from(this.storage.blobChunks.getKeys(range))) if (!named.has(key[3])) this.storage.blobChunks.removeSync(key);
    }
  }

  /** Writes a blob with a fresh stamp (inside a write transaction); returns the stamp. */
  private putBlobSync(key: BlobKey, blob: StoredBlob): number {
    const stamp = newStamp();
    this.storage.blobs.putSync(key, blob);
    this.storage.blobStamps.putSync(key, stamp);
    return stamp;
  }

  /**
   * Removes a blob and its stamp (inside a write transaction). With `removedSlots`, the blob's slot
   * is recorded there so chunks it may have named can be collected afterwards (collectChunksSync;
   * recording every slot avoids reading each removed blob to learn whether it was chunked).
   */
  private removeBlobSync(key: BlobKey, removedSlots?: RemovedSlots): void {
    removedSlots?.add(key[1], key[2]);
    this.storage.blobs.removeSync(key);
    this.storage.blobStamps.removeSync(key);
  }


  /**
   * Queues a write of the thread's checkpoint data. "batch": `write` only puts (conditional puts
   * included) and runs now, and lmdb-js' write thread carries the batch out on its own;
   * "transaction": `write` also reads, so the write thread calls it back on this JS thread (and
   * waits for it to be free) when the transaction starts. Returns the write's own outcome
   * (rejects when it failed; that is also reported through the queue).
   */
  private queueWrite(threadId: string, mode: "batch" | "transaction", write: () => void): Promise<unknown> {
    const { byThread, pending, failed } = this.queue;
    const issue = (): Promise<unknown> => {
      try {
        return mode === "batch" ? this.storage.root.batch(write) : this.storage.root.transaction(write);
      } catch (err) {
        return Promise.reject(err); // reported like a failed commit
      }
    };
    const barrier = this.queue.barriers.get(threadId);
    const written = barrier === undefined ? issue() : barrier.then(issue);
    const committed = written.then(
      () => undefined,
      (err: unknown) => {
        failed.set(threadId, err instanceof Error ? err : new Error(String(err)));
        pending.delete(threadId);
      },
    );
    byThread.set(threadId, committed);
    void committed.then(() => {
      if (byThread.get(threadId) !== committed) return;
      // every queued write of the thread has committed: LMDB answers its reads again
      byThread.delete(threadId);
      pending.delete(threadId);
      this.queue.queued.delete(threadId);
    });
    return written;
  }

  /**
   * The pending view of a root checkpoint being put, or undefined when it cannot be known for
   * certain to be the thread's latest with every channel accounted for (then reads wait for the
   * commit, as for any other write).
   */
  private pendingAfterPut(
    threadId: string, parentId: string | null, parentTags: TagMap | undefined | null, checkpoint: Checkpoint, newVersions: ChannelVersions,
    changed: string[], blobs: EncodedBlob[], lists: (unknown[] | undefined)[], [bodyType, body]: [string, Uint8Array], [metadataType, metadata]: [string, Uint8Array],
    queued: boolean,
  ): PendingCheckpoint | undefined {
    if (checkpoint.v < 4) return undefined; // older formats need migratePendingSends on read
    const previous = this.queue.pending.get(threadId);
    if (queued && previous === undefined) return undefined; // queued writes of unknown effect
    if (previous !== undefined && checkpoint.id <= previous.id) return undefined; // not the newest (or a re-put)
    if (!queued && !this.isNewest(threadId, checkpoint.id)) return undefined;
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
      id: checkpoint.id, parentId, bodyType, body, metadataType, metadata, channels, writes: new Map(),
    };
  }

  /** The thread's queued-write bookkeeping (kept until its queue drains). */
  private queuedWritesOf(threadId: string): QueuedThreadWrites {
    let queued = this.queue.queued.get(threadId);
    if (queued === undefined) this.queue.queued.set(threadId, (queued = new QueuedThreadWrites()));
    return queued;
  }

  /**
   * The fork tags the put's parent record has or will have, without reading inside the
   * transaction: none for a first checkpoint, the queued parent's once decided, else the committed
   * record's; null when unknown (the parent is queued and its transaction has not run yet).
   */
  private knownParentTags(threadId: string, ns: string, parentId: string | null, queued: QueuedThreadWrites): TagMap | undefined | null {
    if (parentId === null) return undefined;
    const fromQueue = queued.tagsOf(ns, parentId);
    if (fromQueue !== undefined) return fromQueue;
    try {
      const record = this.storage.checkpoints.get([threadId, ns, parentId]);
      // no committed record: the parent is still queued (or does not exist, which the transaction path handles)
      return record === undefined ? null : record.tags;
    } catch {
      return null;
    }
  }

  /** Whether no blob of `version` exists or is queued in the slot, on any branch (numeric versions only). */
  private isUnusedVersion(threadId: string, ns: string, channel: string, version: StoredChannelVersion, queued: QueuedThreadWrites): boolean {
    if (typeof version !== "number" || !(version > queued.highestVersion(ns, channel))) return false; // NaN compares false
    return version > queued.highestCommittedVersion(ns, channel, () => {
      try {
        for (const key of this.storage.blobs.getKeys({ start: [threadId, ns, channel, MAX_KEY], end: [threadId, ns, channel], reverse: true, limit: 1 })) {
          return typeof key[3] === "number" ? key[3] : Number.NaN; // the slot's highest stored version
        }
        return Number.NEGATIVE_INFINITY;
      } catch {
        return Number.NaN;
      }
    });
  }

  /** Whether `id` sorts after every committed root checkpoint of the thread (false when that cannot be read). */
  private isNewest(threadId: string, id: string): boolean {
    try {
      for (const key of this.storage.checkpoints.getKeys({ start: [threadId, "", MAX_KEY], end: [threadId, ""], reverse: true, limit: 1 })) {
        if (key[2] >= id) return false;
      }
      return true;
    } catch {
      return false; // e.g. a thread id too long for a key: the write fails and reports it, as usual
    }
  }

  /** The tuple getTuple would return for a pending checkpoint once its writes commit. */
  private async pendingTuple(threadId: string, pending: PendingCheckpoint): Promise<CheckpointTuple> {
    const body = (await this.serde.loadsTyped(pending.bodyType, pending.body)) as StoredCheckpointBody;
    const values: Record<string, unknown> = {};
    for (const [channel, entry] of pending.channels) {
      if ("list" in entry) values[channel] = entry.list.slice();
      else if ("bytes" in entry) values[channel] = await this.serde.loadsTyped(entry.type, entry.bytes);
      else if ("storedTag" in entry) {
        const value = await this.loadChannelValue(threadId, "", channel, entry.version, entry.storedTag);
        if (value !== NO_VALUE) values[channel] = value;
      }
    }
    const writes = [...pending.writes.values()]
      .map((w) => ({ sortKey: writesSortKey(w.taskPath, w.taskId, w.idx), w }))
      .sort((a, b) => compareWritesSortKeys(a.sortKey, b.sortKey));
    const tuple: CheckpointTuple = {
      config: { configurable: { thread_id: threadId, checkpoint_ns: "", checkpoint_id: pending.id } },
      checkpoint: { ...body, channel_versions: body.channel_versions ?? {}, channel_values: values },
      metadata: (await this.serde.loadsTyped(pending.metadataType, pending.metadata)) as CheckpointMetadata,
      pendingWrites: await Promise.all(writes.map(async ({ w }): Promise<CheckpointPendingWrite> => [w.taskId, w.channel, await this.serde.loadsTyped(w.type, w.value)])),
    };
    if (pending.parentId !== null) {
      tuple.parentConfig = { configurable: { thread_id: threadId, checkpoint_ns: "", checkpoint_id: pending.parentId } };
    }
    return tuple;
  }

  private throwFailedWrite(threadId: string): void {
    const failed = this.queue.failed.get(threadId);
    if (failed === undefined) return;
    this.queue.failed.delete(threadId);
    throw new TroupeError("INTERNAL", `an earlier checkpoint write of thread ${threadId} failed: ${failed.message}`);
  }

  private async toTuple(key: CheckpointKey, record: StoredCheckpoint, loadedMetadata?: CheckpointMetadata): Promise<CheckpointTuple> {
    const [threadId, ns, id] = key;
    const body = (await this.serde.loadsTyped(record.type, record.checkpoint)) as StoredCheckpointBody;
    const checkpoint: Checkpoint = {
      ...body,
      channel_versions: body.channel_versions ?? {},
      channel_values: await this.loadChannelValues(threadId, ns, body.channel_versions ?? {}, record.tags),
    };
    if (checkpoint.v < 4 && record.parentId !== null) await this.migratePendingSends(checkpoint, threadId, ns, record.parentId);
    const tuple: CheckpointTuple = {
      config: { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: id } },
      checkpoint,
      metadata: loadedMetadata ?? ((await this.serde.loadsTyped(record.metadataType, record.metadata)) as CheckpointMetadata),
      pendingWrites: await this.loadWrites(threadId, ns, id),
    };
    if (record.parentId !== null) {
      tuple.parentConfig = { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: record.parentId } };
    }
    return tuple;
  }

  private async loadChannelValues(threadId: string, ns: string, versions: ChannelVersions, tags: TagMap | undefined): Promise<Record<string, unknown>> {
    const values: Record<string, unknown> = {};
    for (const channel in versions) {
      if (!Object.hasOwn(versions, channel)) continue;
      const version = versions[channel];
      const value = await this.loadChannelValue(threadId, ns, channel, version, tagOf(tags, channel, version));
      if (value !== NO_VALUE) values[channel] = value;
    }
    return values;
  }

  /** One stored channel value (from the blob cache when it holds this very write), or NO_VALUE. */
  private async loadChannelValue(threadId: string, ns: string, channel: string, version: StoredChannelVersion, tag: string): Promise<unknown> {
    const blobKey: BlobKey = [threadId, ns, channel, version, tag];
    const cacheKey = BlobCache.key(threadId, ns, channel, version, tag);
    // a hit checks the blob's small stamp only: the (possibly large) bytes are not read
    if (this.blobCache.has(cacheKey)) {
      const cached = this.blobCache.get(cacheKey, this.storage.blobStamps.get(blobKey));
      if (cached !== undefined) return cached;
    }
    const blob = this.storage.blobs.get(blobKey);
    if (blob === undefined) return NO_VALUE;
    const bytes = this.blobBytes(threadId, ns, channel, blob);
    // read together with the bytes (no await between): the stamp of the write they came from
    const stamp = this.blobCache.accepts(bytes.byteLength) ? this.storage.blobStamps.get(blobKey) : undefined;
    const value: unknown = await this.serde.loadsTyped(blob.type, bytes);
    if (stamp !== undefined) this.blobCache.fill(cacheKey, threadId, stamp, bytes.byteLength, value);
    return value;
  }

  /** Pending writes of one checkpoint in writesSortKey order (the order live execution applies them). */
  private async loadWrites(threadId: string, ns: string, checkpointId: string): Promise<CheckpointPendingWrite[]> {
    const entries = Array.from(this.storage.writes.getRange({
      start: [threadId, ns, checkpointId], end: [threadId, ns, checkpointId, MAX_KEY],
    }));
    if (entries.length === 0) return [];
    const sorted = entries
      .map(({ key, value }) => ({ sortKey: writesSortKey(value.taskPath ?? "", key[3], key[4]), taskId: key[3], value }))
      .sort((a, b) => compareWritesSortKeys(a.sortKey, b.sortKey));
    return Promise.all(sorted.map(async ({ taskId, value }: { taskId: string; value: StoredWrite }): Promise<CheckpointPendingWrite> =>
      [taskId, value.channel, await this.serde.loadsTyped(value.type, value.value)]));
  }

  /** Checkpoints older than format v4 kept pending sends as TASKS writes on their parent. */
  private async migratePendingSends(checkpoint: Checkpoint, threadId: string, ns: string, parentId: string): Promise<void> {
    const sends = (await this.loadWrites(threadId, ns, parentId)).filter(([, channel]) => channel === TASKS).map(([, , value]) => value);
    const versions = Object.values(checkpoint.channel_versions);
    checkpoint.channel_values[TASKS] = sends;
    checkpoint.channel_versions[TASKS] = versions.length > 0 ? maxChannelVersion(...versions) : this.getNextVersion(undefined);
  }

  /** Keys of one (thread, ns), newest first, read in small synchronous chunks (no read txn spans an await). */
  private *namespaceKeysNewestFirst(threadId: string, ns: string, beforeId: string): Generator<CheckpointKey> {
    let start: (string | Uint8Array)[] = [threadId, ns, beforeId || MAX_KEY];
    let exclusiveStart = beforeId !== "";
    for (;;) {
      const chunk = Array.from(this.storage.checkpoints.getKeys({ start, end: [threadId, ns], reverse: true, exclusiveStart, limit: KEY_CHUNK }));
      yield* chunk;
      if (chunk.length < KEY_CHUNK) return;
      start = chunk[chunk.length - 1];
      exclusiveStart = true;
    }
  }

  /** Keys of one thread or of every thread (optionally one namespace), ordered by checkpoint id, newest first. */
  private keysNewestFirst(threadId: string | undefined, ns: string | undefined, beforeId: string): CheckpointKey[] {
    const range = threadId === undefined ? {} : { start: [threadId], end: [threadId, MAX_KEY] };
    const keys = Array.from(this.storage.checkpoints.getKeys(range))
      .filter((key) => (ns === undefined || key[1] === ns) && (beforeId === "" || key[2] < beforeId));
    return keys.sort((a, b) => compareDesc(a[2], b[2]) || compareDesc(b[0], a[0]) || compareDesc(b[1], a[1]));
  }
}

/** Tags a child keeps from its parent: channels it did not rewrite and whose version is unchanged. */
function inheritedTags(parentTags: TagMap | undefined, checkpoint: Checkpoint, newVersions: ChannelVersions): TagMap {
  const tags: TagMap = {};
  if (parentTags === undefined) return tags;
  for (const channel in parentTags) {
    const tagged = parentTags[channel];
    if (!Object.hasOwn(newVersions, channel) && checkpoint.channel_versions[channel] === tagged[0]) tags[channel] = tagged;
  }
  return tags;
}

/** The channel value of `channel` at `version`: its branch tag, or "" for the plain value. */
function tagOf(tags: TagMap | undefined, channel: string, version: unknown): string {
  const tagged = tags?.[channel];
  return tagged !== undefined && tagged[0] === version ? tagged[1] : "";
}

/** The (namespace, channel) slots of a thread whose blobs a transaction removed. */
class RemovedSlots {
  private readonly slots = new Map<string, [string, string]>();

  add(ns: string, channel: string): void {
    this.slots.set(JSON.stringify([ns, channel]), [ns, channel]);
  }

  values(): IterableIterator<[string, string]> {
    return this.slots.values();
  }
}

/** LMDB's largest key is 1,978 bytes: keys made of these parts (plus small numbers) stay well below. */
function fitsInKey(...parts: string[]): boolean {
  let bytes = 0;
  for (const part of parts) bytes += Buffer.byteLength(part) + 8;
  return bytes <= 1_600;
}

/** A random token identifying one blob write (53 bits: exact as a JS number and in msgpack). */
function newStamp(): number {
  return Math.floor(Math.random() * Number.MAX_SAFE_INTEGER);
}

function blobId(ns: string, channel: string, version: StoredChannelVersion, tag: string): string {
  return JSON.stringify([ns, channel, version, tag]);
}

function compareDesc(a: string, b: string): number {
  return a < b ? 1 : a > b ? -1 : 0;
}

/**
 * How a pending checkpoint holds a channel value it was put with: the put's private copy of the
 * list where the blob cache keeps it too (so a read hands out what a read after the commit would),
 * else the serde's bytes, revived on each read.
 */
function pendingChannelOf(version: StoredChannelVersion, list: unknown[] | undefined, encoded: EncodedBlob): PendingChannel {
  if (list !== undefined) return { version, list };
  if (encoded.blob.chunks === undefined) return { version, type: encoded.blob.type, bytes: encoded.blob.value };
  return { version, type: encoded.blob.type, bytes: joinChunks(encoded.chunks.map((c) => c.bytes), encoded.blob.value) };
}
