// LangGraph checkpointer on the shared LMDB env: the BaseCheckpointSaver API (getTuple, list, put,
// putWrites) and the thread operations of the storage port. Channel values live in the `blobs` DB
// keyed by [thread, ns, channel, version, tag] (blob-store.ts), so each step stores only the
// channels it changed.
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver,
  WRITES_IDX_MAP,
  getCheckpointId,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointTuple,
  type PendingWrite,
  type SerializerProtocol,
} from "@langchain/langgraph-checkpoint";
import { TroupeError } from "../../errors.ts";
import type { Storage, StoredBlobRef, StoredChannelVersion, StoredCheckpoint, StoredWrite } from "../env.ts";
import { BlobCache } from "./blob-cache.ts";
import { encodeBlob, fitsInKey, inheritedTags, newStamp, putBlobSync } from "./blob-store.ts";
import { matchesFilter, namespaceOf, requireThreadId, runIdOf, threadIdOf } from "./checkpoint-config.ts";
import { MAX_KEY, type BlobKey, type CheckpointKey, type LmdbSaverContext } from "./lmdb-context.ts";
import { MessageCachingSerde } from "./message-serde.ts";
import { addPendingWrites, pendingAfterPut, pendingTuple, pendingWriteKey, type PendingWriteRecord } from "./pending-view.ts";
import type { QueuedThreadWrites, TagMap } from "./queued-writes.ts";
import * as ops from "./thread-ops.ts";
import { keysNewestFirst, namespaceKeysNewestFirst, toTuple } from "./tuple.ts";
import { CheckpointWriteQueue } from "./write-queue.ts";

/*
 * Storage contract
 * - checkpoints [thread, ns, id]: the checkpoint serialised WITHOUT channel_values, plus metadata;
 *   blobs and their fork tags: blob-store.ts.
 * - writes [thread, ns, id, task, idx]: pending writes, returned in writesSortKey order.
 * put/putWrites resolve once their transaction is queued, not when it commits: LangGraph awaits
 *   every checkpoint write of a run, and waiting for lmdb-js' batched commits doubled a short run's
 *   latency. lmdb-js commits transactions in the order they were queued, so a run's checkpoints
 *   always commit before (or with) the actor's final run-status transaction queued after them; a
 *   crash in between loses only checkpoints of a run that is still `running`, which recovery
 *   re-executes. Reads of a thread first wait for its queued writes (read-your-writes,
 *   write-queue.ts), and a failed write is reported by the next read of or write to that thread
 *   (and by flush()). The one exception is the read every run starts with, of the thread's latest
 *   root checkpoint: while that checkpoint's write is queued it is answered from what
 *   put/putWrites were given (pending-view.ts), so a thread's next run does not wait for the
 *   previous run's commit.
 * - blob_chunks [thread, ns, channel, chunk id]: message lists of CHUNK_ITEMS+ messages are stored as
 *   shared, content-addressed chunks plus the blob's own tail (message-chunks.ts), so a long
 *   thread's history does not store its whole list again at every step. Every path that removes
 *   blobs removes the chunks left unreferenced in the same transaction (chunk-gc.ts).
 * Long threads: the serde is wrapped in MessageCachingSerde (per-message JSON cache on put) and
 * decoded message-list blobs are kept in a BlobCache (filled on put and read, verified against
 * the blob's stored stamp on every hit, so a hit reads no blob bytes), so a run costs O(new messages), not O(history), in (de)serialization.
 */

export class LmdbCheckpointSaver extends BaseCheckpointSaver {
  private readonly ctx: LmdbSaverContext;
  /** the first version of a channel (old-format pending sends, tuple.ts) */
  private readonly initialVersion = (): StoredChannelVersion => this.getNextVersion(undefined);

  constructor(storage: Storage, serde?: SerializerProtocol, blobCacheBytes?: number) {
    const messageSerde = serde instanceof MessageCachingSerde ? serde : new MessageCachingSerde(serde);
    super(messageSerde);
    this.ctx = { storage, serde: messageSerde, blobCache: new BlobCache(blobCacheBytes), queue: CheckpointWriteQueue.of(storage) };
  }

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const threadId = threadIdOf(config);
    if (threadId === undefined) return undefined;
    const ns = namespaceOf(config);
    const id = getCheckpointId(config);
    const { storage, queue } = this.ctx;
    const pending = ns === "" ? queue.pending.get(threadId) : undefined;
    if (pending !== undefined && (!id || id === pending.id) && queue.byThread.has(threadId)) {
      queue.throwFailedWrite(threadId);
      return pendingTuple(this.ctx, threadId, pending);
    }
    await queue.flush(threadId);
    if (id) {
      const key: CheckpointKey = [threadId, ns, id];
      const record = storage.checkpoints.get(key);
      return record === undefined ? undefined : toTuple(this.ctx, key, record, this.initialVersion);
    }
    for (const { key, value } of storage.checkpoints.getRange({
      start: [threadId, ns, MAX_KEY],
      end: [threadId, ns],
      reverse: true,
      limit: 1,
    }))
      return toTuple(this.ctx, key, value, this.initialVersion);
    return undefined;
  }

  async *list(config: RunnableConfig, options: CheckpointListOptions = {}): AsyncGenerator<CheckpointTuple> {
    const { before, filter } = options;
    let remaining = options.limit ?? Infinity;
    if (remaining <= 0) return;
    const threadId = threadIdOf(config);
    await this.ctx.queue.flush(threadId);
    const ns = config.configurable?.checkpoint_ns;
    const onlyId = getCheckpointId(config);
    const beforeId = before === undefined ? "" : getCheckpointId(before);
    const keys =
      threadId !== undefined && typeof ns === "string"
        ? namespaceKeysNewestFirst(this.ctx.storage, threadId, ns, beforeId)
        : keysNewestFirst(this.ctx.storage, threadId, typeof ns === "string" ? ns : undefined, beforeId);
    for (const key of keys) {
      if (onlyId && key[2] !== onlyId) continue;
      const record = this.ctx.storage.checkpoints.get(key);
      if (record === undefined) continue;
      const metadata = (await this.serde.loadsTyped(record.metadataType, record.metadata)) as CheckpointMetadata;
      if (filter !== undefined && !matchesFilter(metadata, filter)) continue;
      yield await toTuple(this.ctx, key, record, this.initialVersion, metadata);
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
      Promise.all(changed.map((ch) => encodeBlob(this.ctx.serde, values[ch]))),
    ]);
    const runId = runIdOf(metadata, config);
    // the stored record, whichever path below writes it (they differ in how blob refs and tags are known)
    const checkpointRecord = (blobRefs: StoredBlobRef[], tags: TagMap): StoredCheckpoint => {
      const record: StoredCheckpoint = { type, checkpoint: bytes, metadataType, metadata: metadataBytes, parentId, runId, blobs: blobRefs };
      if (Object.keys(tags).length > 0) record.tags = tags;
      return record;
    };
    const { checkpoints, blobs: blobDb, blobChunks, blobStamps } = this.ctx.storage;
    const key: CheckpointKey = [threadId, ns, checkpoint.id];
    this.ctx.queue.throwFailedWrite(threadId);
    // Decided before queueing (whether earlier writes are still queued is part of both questions):
    // whether the record can be written without reading LMDB in the transaction, and the pending view.
    const queued = this.ctx.queue.byThread.has(threadId);
    const queuedWrites = this.ctx.queue.queuedWritesOf(threadId);
    // (no resetReadTxn needed for the reads below: they concern this thread's own writes, and
    // lmdb-js renews its read snapshot whenever one of this JS thread's commits resolves)
    const parentTags = this.knownParentTags(threadId, ns, parentId, queuedWrites);
    const readFree =
      parentTags !== null &&
      fitsInKey(threadId, ns, checkpoint.id) &&
      changed.every((ch) => fitsInKey(threadId, ns, ch) && this.isUnusedVersion(threadId, ns, ch, newVersions[ch], queuedWrites));
    const tags = readFree ? inheritedTags(parentTags, checkpoint, newVersions) : undefined;
    // One private copy of each list value the blob cache keeps, taken now and shared by the cache and
    // the pending view on either write path (both only hand out copies of it): a long thread's list
    // is copied once per put, not twice.
    // (A chunked list holds only LangChain messages: MessageCachingSerde.dumpsChunked chunks nothing else.)
    const lists = changed.map((ch, i) =>
      this.ctx.blobCache.wouldKeep(blobs[i].byteLength, values[ch], blobs[i].blob.chunks !== undefined) ? values[ch].slice() : undefined,
    );
    const pending =
      ns === ""
        ? pendingAfterPut(
            this.ctx,
            threadId,
            parentId,
            parentTags,
            checkpoint,
            newVersions,
            changed,
            blobs,
            lists,
            [type, bytes],
            [metadataType, metadataBytes],
            queued,
          )
        : undefined;
    queuedWrites.noteCheckpoint(ns, checkpoint.id, tags);
    for (const ch of changed) queuedWrites.noteBlob(ns, ch, newVersions[ch]);
    if (tags !== undefined) {
      // every changed channel gets a new plain blob: nothing to read, so lmdb-js' write thread runs it alone
      const stamps = changed.map((ch, i) => {
        const stamp = newStamp();
        const list = lists[i];
        if (list !== undefined) this.ctx.blobCache.setOwned(BlobCache.key(threadId, ns, ch, newVersions[ch], ""), threadId, stamp, blobs[i].byteLength, list);
        return stamp;
      });
      const record = checkpointRecord(
        changed.map((ch): StoredBlobRef => [ch, newVersions[ch], ""]),
        tags,
      );
      const storedChunks = this.ctx.queue.storedChunks;
      const knownChunks = blobs.some((b) => b.chunks.length > 0) ? storedChunks.of(threadId) : undefined;
      const written = this.ctx.queue.queueWrite(this.ctx.storage, threadId, "batch", () => {
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
        void written.then(
          () => {
            changed.forEach((ch, i) => {
              const ids = blobs[i].blob.chunks;
              if (ids !== undefined) storedChunks.noteCommitted(threadId, knownChunks, ns, ch, ids);
            });
          },
          () => undefined,
        ); // a failed write is reported through the queue
      }
    } else {
      this.ctx.queue.queueWrite(this.ctx.storage, threadId, "transaction", () => {
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
          const stamp = putBlobSync(this.ctx.storage, [threadId, ns, ch, version, tag], blobs[i].blob);
          const list = lists[i];
          if (list !== undefined) this.ctx.blobCache.setOwned(BlobCache.key(threadId, ns, ch, version, tag), threadId, stamp, blobs[i].byteLength, list);
          created.push([ch, version, tag]);
        });
        const record = checkpointRecord(created, tags);
        checkpoints.putSync(key, record);
        queuedWrites.settleTags(ns, checkpoint.id, tags); // a child put from now on needs no read
      });
    }
    if (pending !== undefined) this.ctx.queue.pending.set(threadId, pending);
    else if (ns === "") this.ctx.queue.pending.delete(threadId);
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
    const db = this.ctx.storage.writes;
    this.ctx.queue.throwFailedWrite(threadId);
    const pending = ns === "" ? this.ctx.queue.pending.get(threadId) : undefined;
    // While its checkpoint is pending, the pending view holds every write put on it (the id is new
    // with the put, and whatever removes writes drops the view): first-wins is decided here, and
    // the writes go to LMDB as plain puts instead of conditional ones (two write instructions each).
    let known: boolean[] | undefined;
    if (pending !== undefined && pending.id === checkpointId) {
      known = writes.map(([channel], i) => pending.writes.has(pendingWriteKey(taskId, WRITES_IDX_MAP[channel] ?? i)));
      addPendingWrites(
        pending,
        writes.map(([channel], i): PendingWriteRecord => ({
          taskId,
          idx: WRITES_IDX_MAP[channel] ?? i,
          channel,
          type: serialized[i][0],
          value: serialized[i][1],
          taskPath: taskPath ?? "",
        })),
      );
    }
    // Conditional puts need no read on this thread: a batch, unless a key may be too long (then the
    // transaction fails as a whole instead of a batch failing half-written).
    const mode = fitsInKey(threadId, ns, checkpointId, taskId) ? "batch" : "transaction";
    this.ctx.queue.queueWrite(this.ctx.storage, threadId, mode, () => {
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

  // ---- thread operations (thread-ops.ts) ---------------------------------------------------

  patchMetadata(threadId: string, patch: Record<string, unknown>, checkpointId?: string): Promise<boolean> {
    return ops.patchMetadata(this.ctx, threadId, patch, checkpointId);
  }

  deleteThread(threadId: string): Promise<void> {
    return ops.deleteThread(this.ctx, threadId);
  }

  copyThread(fromThreadId: string, toThreadId: string): Promise<void> {
    return ops.copyThread(this.ctx, fromThreadId, toThreadId);
  }

  pruneToLatest(threadId: string): Promise<number> {
    return ops.pruneToLatest(this.ctx, threadId);
  }

  hasCheckpoint(threadId: string, ns: string, checkpointId: string): Promise<boolean> {
    return ops.hasCheckpoint(this.ctx, threadId, ns, checkpointId);
  }

  hasCheckpointOfRun(threadId: string, runId: string): Promise<boolean> {
    return ops.hasCheckpointOfRun(this.ctx, threadId, runId);
  }

  deleteCheckpointsOfRun(threadId: string, runId: string): Promise<number> {
    return ops.deleteCheckpointsOfRun(this.ctx, threadId, runId);
  }

  /** See CheckpointWriteQueue.holdWritesUntil. */
  holdWritesUntil(threadId: string, until: Promise<unknown>, refuseUntil?: Promise<unknown>): void {
    this.ctx.queue.holdWritesUntil(threadId, until, refuseUntil);
  }

  /**
   * Resolves when every write queued for the thread (or for all threads) has committed; rejects
   * with the error of a write that failed since the last report.
   */
  flush(threadId?: string): Promise<void> {
    return this.ctx.queue.flush(threadId);
  }

  // ---- what a put knows without reading inside its transaction -----------------------------

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
      const record = this.ctx.storage.checkpoints.get([threadId, ns, parentId]);
      // no committed record: the parent is still queued (or does not exist, which the transaction path handles)
      return record === undefined ? null : record.tags;
    } catch {
      return null;
    }
  }

  /** Whether no blob of `version` exists or is queued in the slot, on any branch (numeric versions only). */
  private isUnusedVersion(threadId: string, ns: string, channel: string, version: StoredChannelVersion, queued: QueuedThreadWrites): boolean {
    if (typeof version !== "number" || !(version > queued.highestVersion(ns, channel))) return false; // NaN compares false
    return (
      version >
      queued.highestCommittedVersion(ns, channel, () => {
        try {
          for (const key of this.ctx.storage.blobs.getKeys({
            start: [threadId, ns, channel, MAX_KEY],
            end: [threadId, ns, channel],
            reverse: true,
            limit: 1,
          })) {
            return typeof key[3] === "number" ? key[3] : Number.NaN; // the slot's highest stored version
          }
          return Number.NEGATIVE_INFINITY;
        } catch {
          return Number.NaN;
        }
      })
    );
  }
}
