// LangGraph checkpointer on PostgreSQL (tables: schema.ts, statements: checkpoint-sql.ts), with the
// thread operations the actors need beyond BaseCheckpointSaver (ThreadCheckpointOps).
/*
 * - Same bytes as the LMDB saver: values go through the (graph's) serde wrapped in
 *   MessageCachingSerde, long message lists are stored as shared chunks (message-chunks.ts), and
 *   only chunks not known stored for the thread are sent (stored-chunks.ts; the put statement
 *   checks the ones it skips, so another process removing them cannot leave a blob damaged).
 * - One statement per put / putWrites / getTuple (atomic). put and putWrites resolve once the
 *   statement is issued on the thread's write chain, as the LMDB saver's once queued
 *   (issued-writes.ts): a run's puts then leave together instead of a round trip each, and its
 *   checkpoints still commit before the actor's final run record, issued after them. Reads wait
 *   for the thread's issued writes; a failed write is reported by the next read or write.
 * - Writes of a thread go through the storage's per-thread write chain (write-chains.ts), shared
 *   with the run and thread records: they commit in the order they were issued, and
 *   holdWritesUntil puts a barrier in that chain.
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver,
  WRITES_IDX_MAP,
  getCheckpointId,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  type PendingWrite,
  type SerializerProtocol,
} from "@langchain/langgraph-checkpoint";
import type pg from "pg";
import { TroupeError } from "../../errors.ts";
import { fenceValues, type Fence } from "../../cluster/fence.ts";
import { executionOf, matchesFilter, namespaceOf, requireThreadId, runIdOf, threadIdOf } from "../checkpoints/checkpoint-config.ts";
import { joinChunks, type MessageChunk } from "../checkpoints/message-chunks.ts";
import { MessageCachingSerde } from "../checkpoints/message-serde.ts";
import { StoredChunks } from "../checkpoints/stored-chunks.ts";
import { BlobCache } from "../checkpoints/blob-cache.ts";
import { migratePendingSends, revivePendingWrites, tupleConfigs, type StoredPendingWrite } from "../checkpoints/tuple.ts";
import {
  COLLECT_UNNAMED_BLOBS,
  COLLECT_UNNAMED_CHUNKS,
  GET_LATEST_TUPLE,
  GET_TUPLE_BY_ID,
  GET_TUPLES,
  GET_WRITES,
  PUT_CHECKPOINT,
  PUT_CHECKPOINT_FENCED,
  PUT_CHECKPOINT_OR_FAIL,
  PUT_CHECKPOINT_OR_FAIL_FENCED,
  PUT_CHECKPOINTS,
  PUT_WRITES,
  PUT_WRITES_MANY,
  type PutCheckpointItem,
  type PutWritesItem,
} from "./checkpoint-sql.ts";
import type { PostgresDb } from "./pool.ts";
import { InflightCheckpoints, type KnownChannel } from "./inflight-checkpoints.ts";
import { byteaArray } from "./binary-arrays.ts";
import { IssuedCheckpointWrites } from "./issued-writes.ts";
import { ThreadWriteChains, mergeable } from "./write-chains.ts";

type StoredCheckpointBody = Omit<Checkpoint, "channel_values">;

interface TupleRow {
  thread_id: string;
  checkpoint_ns: string;
  checkpoint_id: string;
  parent_checkpoint_id: string | null;
  type: string;
  checkpoint: Buffer;
  metadata_type: string;
  metadata: Buffer;
  channels: string[] | null;
  versions: string[] | null;
  owners: string[] | null;
  stamps: string[] | null;
  types: string[] | null;
  /** the channels' values, one after another (blob_lengths) */
  blobs: Buffer | null;
  blob_lengths: number[] | null;
  complete: boolean;
  task_ids: string[] | null;
  idxs: number[] | null;
  write_channels: string[] | null;
  write_types: string[] | null;
  /** the writes' values, one after another (write_blob_lengths) */
  write_blobs: Buffer | null;
  write_blob_lengths: number[] | null;
  task_paths: string[] | null;
}

interface WriteRow {
  task_id: string;
  idx: number;
  channel: string;
  type: string;
  blob: Buffer;
  task_path: string;
}

/** A channel value ready to store: its row and the chunks it references. */
interface EncodedBlob {
  channel: string;
  version: string;
  type: string;
  bytes: Uint8Array;
  chunks: MessageChunk[] | undefined;
}

/** What a put answers: `missing` chunks, and the stamp (xmin) of each blob row it wrote. */
interface PutRow {
  /** fenced twins only (cluster mode): whether the lease holding stood */
  held?: boolean;
  missing: number;
  blob_channels: string[] | null;
  blob_stamps: string[] | null;
}

/** Checkpoints loaded per statement while list() walks a long history. */
const LIST_BATCH = 16;

export class PostgresCheckpointSaver extends BaseCheckpointSaver {
  private readonly pool: pg.Pool;
  private readonly messageSerde: MessageCachingSerde;
  private readonly storedChunks = new StoredChunks();
  /*
   * Decoded message lists by blob (blob-cache.ts, as the LMDB saver's): a run on a long thread
   * reads the list the previous run put, and reviving every message again (LangChain load) made
   * each run cost O(messages). An entry is trusted only while the blob row's xmin is the one it
   * was built from (a rewrite by any process changes it); the bytes are still read.
   */
  private readonly blobCache = new BlobCache();
  /** checkpoint writes issued and not yet settled, and their failures (shared by the storage's savers) */
  private readonly issued: IssuedCheckpointWrites;
  /** the thread's latest root checkpoint while its writes are in flight (inflight-checkpoints.ts) */
  private readonly inflight: InflightCheckpoints;

  /** `chains`: the storage's per-thread write order (a saver of its own when not given) */
  constructor(
    db: PostgresDb,
    serde?: SerializerProtocol,
    private readonly chains = new ThreadWriteChains(db.pool),
  ) {
    const messageSerde = serde instanceof MessageCachingSerde ? serde : new MessageCachingSerde(serde);
    super(messageSerde);
    this.messageSerde = messageSerde;
    this.pool = db.pool;
    this.issued = IssuedCheckpointWrites.of(chains);
    this.inflight = InflightCheckpoints.of(chains);
  }

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const threadId = threadIdOf(config);
    if (threadId === undefined) return undefined;
    const ns = namespaceOf(config);
    const id = getCheckpointId(config);
    if (hasNul(ns, id)) return undefined; // no text column holds one: no such checkpoint
    const epoch = this.chains.fenceOf(threadId)?.epoch;
    if (ns === "") {
      // the next run on a busy thread: the previous run's last checkpoint, its writes still in flight
      const view = this.inflight.servable(threadId, epoch, this.issued.inFlight(threadId));
      if (view !== undefined && (!id || id === view.id)) {
        this.issued.throwFailed(threadId);
        // (id "": known to have none, learntNoCheckpoints)
        return view.id === "" ? undefined : InflightCheckpoints.tuple(this.serde, threadId, view);
      }
    }
    await this.issued.settled(threadId);
    const result = id
      ? await this.pool.query<TupleRow>({ ...GET_TUPLE_BY_ID, values: [threadId, ns, id] })
      : await this.pool.query<TupleRow>({ ...GET_LATEST_TUPLE, values: [threadId, ns] });
    const row = result.rows[0];
    if (row === undefined) {
      if (ns === "" && !id && !this.issued.inFlight(threadId)) this.inflight.learntEmpty(threadId, epoch);
      return undefined;
    }
    const tuple = await this.toTuple(row);
    // the latest as read, with nothing issued meanwhile: a next put can build its view on it
    if (ns === "" && !id && !this.issued.inFlight(threadId)) this.learn(row, tuple, epoch);
    return tuple;
  }

  /** A read's latest root checkpoint as the known latest (its channels reloaded from the row on demand). */
  private learn(row: TupleRow, tuple: CheckpointTuple, epoch: number | undefined): void {
    const { thread_id: threadId, checkpoint_ns: ns } = row;
    const versions = tuple.checkpoint.channel_versions;
    const channels = new Map<string, KnownChannel>();
    const blobs = splitBytes(row.blobs, row.blob_lengths);
    (row.channels ?? []).forEach((channel, i) => {
      const version = row.versions![i];
      // a ref of another version than the checkpoint's: the put statement could inherit it, a view would not
      if (!Object.hasOwn(versions, channel) || versionText(versions[channel]) !== version) return;
      channels.set(channel, { version, load: () => this.channelValue(threadId, ns, channel, row, i, blobs[i]) });
    });
    if ((row.channels ?? []).length !== channels.size) return this.inflight.forget(threadId);
    for (const [channel, version] of Object.entries(versions))
      if (!channels.has(channel)) channels.set(channel, { version: versionText(version), load: undefined });
    this.inflight.learnt(threadId, {
      id: row.checkpoint_id,
      parentId: row.parent_checkpoint_id,
      epoch,
      bodyType: row.type,
      body: row.checkpoint,
      metadataType: row.metadata_type,
      metadata: row.metadata,
      channels,
    });
  }

  async *list(config: RunnableConfig, options: CheckpointListOptions = {}): AsyncGenerator<CheckpointTuple> {
    const { before, filter } = options;
    let remaining = options.limit ?? Infinity;
    if (remaining <= 0) return;
    const where: string[] = [];
    const values: unknown[] = [];
    const param = (value: unknown) => {
      values.push(value);
      return `$${values.length}`;
    };
    const threadId = threadIdOf(config);
    if (hasNul(threadId, config.configurable?.checkpoint_ns, getCheckpointId(config), before === undefined ? undefined : getCheckpointId(before))) return;
    await (threadId === undefined ? this.issued.settledAll() : this.issued.settled(threadId));
    if (threadId !== undefined) where.push(`thread_id = ${param(threadId)}`);
    const ns: unknown = config.configurable?.checkpoint_ns;
    if (typeof ns === "string") where.push(`checkpoint_ns = ${param(ns)}`);
    const onlyId = getCheckpointId(config);
    if (onlyId) where.push(`checkpoint_id = ${param(onlyId)}`);
    const beforeId = before === undefined ? "" : getCheckpointId(before);
    if (beforeId) where.push(`checkpoint_id < ${param(beforeId)}`);
    // the index narrows by containment; matchesFilter below decides (equality, as the LMDB saver)
    const containment = filter === undefined ? undefined : containmentOf(filter);
    if (containment !== undefined) where.push(`(metadata_json @> ${param(containment)}::jsonb OR metadata_json IS NULL)`);
    const keys = await this.pool.query<{ thread_id: string; checkpoint_ns: string; checkpoint_id: string }>(
      `SELECT thread_id, checkpoint_ns, checkpoint_id FROM checkpoints ${where.length > 0 ? `WHERE ${where.join(" AND ")}` : ""}
       ORDER BY checkpoint_id DESC, thread_id, checkpoint_ns`,
      values,
    );
    for (let at = 0; at < keys.rows.length; at += LIST_BATCH) {
      const batch = keys.rows.slice(at, at + LIST_BATCH);
      const rows = await this.pool.query<TupleRow>({
        ...GET_TUPLES,
        values: [batch.map((k) => k.thread_id), batch.map((k) => k.checkpoint_ns), batch.map((k) => k.checkpoint_id)],
      });
      const byKey = new Map(rows.rows.map((row) => [keyOf(row.thread_id, row.checkpoint_ns, row.checkpoint_id), row]));
      for (const key of batch) {
        const row = byKey.get(keyOf(key.thread_id, key.checkpoint_ns, key.checkpoint_id));
        if (row === undefined) continue; // removed since the keys were read
        const metadata = (await this.serde.loadsTyped(row.metadata_type, row.metadata)) as CheckpointMetadata;
        if (filter !== undefined && !matchesFilter(metadata, filter)) continue;
        yield await this.toTuple(row, metadata);
        if (--remaining <= 0) return;
      }
    }
  }

  async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    const threadId = requireThreadId(config, "put a checkpoint");
    this.issued.throwIfRefused(executionOf(config));
    this.issued.throwFailed(threadId);
    const ns = namespaceOf(config);
    const parentId = getCheckpointId(config) || null;
    const { channel_values: values, ...body } = checkpoint;
    const changed = Object.keys(newVersions).filter((ch) => Object.hasOwn(values, ch) && values[ch] !== undefined);
    const [[type, bytes], [metadataType, metadataBytes], blobs] = await Promise.all([
      this.serde.dumpsTyped(body),
      this.serde.dumpsTyped(metadata),
      Promise.all(changed.map((ch) => this.encodeBlob(ch, versionText(newVersions[ch]), values[ch]))),
    ]);
    const versions: Record<string, string> = {};
    for (const [channel, version] of Object.entries(checkpoint.channel_versions)) versions[channel] = versionText(version);
    const ownRefs: Record<string, [string, string]> = {};
    for (const blob of blobs) ownRefs[blob.channel] = [blob.version, checkpoint.id];
    // message lists the cache will hold once the put committed (copied now, as the LMDB saver does)
    const lists = blobs.map((b) =>
      this.blobCache.wouldKeep(storedBytes(b), values[b.channel], b.chunks !== undefined) ? (values[b.channel] as unknown[]).slice() : undefined,
    );
    const committed = (row: PutRow) => {
      this.noteChunksStored(threadId, ns, blobs);
      this.cacheWritten(threadId, ns, checkpoint.id, blobs, lists, row);
    };
    if (ns === "") this.knowPut(threadId, checkpoint, parentId, versions, newVersions, blobs, lists, [type, bytes], [metadataType, metadataBytes]);
    const runId = runIdOf(metadata, config);
    const metadataJson = metadataJsonOf(metadataType, metadataBytes);
    // PUT_CHECKPOINT's own parameters, made only if the put is sent on its own (in a batch it is
    // usually merged, and the merged statement's values() makes its arrays): until the write
    // settles, whatever this holds stays alive, and a run's puts outlive young-generation GCs
    let fixedValues: unknown[] | undefined;
    const fixed = (): unknown[] =>
      (fixedValues ??= [
        threadId,
        ns,
        checkpoint.id,
        parentId,
        runId,
        type,
        bytes,
        metadataType,
        metadataBytes,
        metadataJson,
        JSON.stringify(versions),
        Object.keys(newVersions),
        JSON.stringify(ownRefs),
        blobs.map((b) => b.channel),
        blobs.map((b) => b.version),
        blobs.map((b) => b.type),
        byteaArray(blobs.map((b) => b.bytes)),
        blobs.map((b) => (b.chunks === undefined ? null : b.chunks.map((c) => c.id).join(","))),
      ]);
    const fence = this.chains.fenceOf(threadId); // cluster mode: written only while this holding stands
    const written = this.chains.issueStatement(threadId, {
      // in a batch: the statement that fails when a chunk it skipped is missing (the batch then
      // runs each write alone, this one through writeCheckpoint, which resends the chunks)
      query: () => ({
        ...(fence ? PUT_CHECKPOINT_OR_FAIL_FENCED : PUT_CHECKPOINT_OR_FAIL),
        values: [...this.putValues(threadId, ns, fixed(), blobs, true), ...(fence === undefined ? [] : fenceValues(fence))],
      }),
      result: (r) => {
        if (fence !== undefined) this.chains.checkHeld(fence, (r.rows[0] as PutRow).held);
        committed(r.rows[0] as PutRow);
      },
      alone: async () => committed(await this.writeCheckpoint(threadId, ns, checkpoint.id, fixed(), blobs, fence)),
      // several puts in a batch: one statement (its row for this put answers as the statement above)
      merge: mergeable(PUT_CHECKPOINTS, (): PutCheckpointItem => {
        const { send, skipped } = this.chunksToSend(threadId, ns, blobs, true);
        return {
          threadId,
          ns,
          checkpointId: checkpoint.id,
          parentId,
          runId,
          type,
          body: bytes,
          metadataType,
          metadata: metadataBytes,
          metadataJson,
          versions,
          newVersions: Object.keys(newVersions),
          ownRefs,
          blobs: blobs.map((b) => ({
            channel: b.channel,
            version: b.version,
            type: b.type,
            bytes: b.bytes,
            chunks: b.chunks === undefined ? null : b.chunks.map((c) => c.id).join(","),
          })),
          chunks: send.map((x) => ({ channel: x.channel, id: x.chunk.id, bytes: x.chunk.bytes })),
          skipped,
          fence,
        };
      }),
    });
    // (fenced, on a cluster node: a write the lease refused tells the shard at once, through the
    // chains' refused listener, and is reported by the thread's next checkpoint read or write)
    this.issued.add(threadId, written);
    return { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpoint.id } };
  }

  /** A root put: the thread's new known latest, its values as the read will rebuild them. */
  private knowPut(
    threadId: string,
    checkpoint: Checkpoint,
    parentId: string | null,
    versions: Record<string, string>,
    newVersions: ChannelVersions,
    blobs: EncodedBlob[],
    lists: (unknown[] | undefined)[],
    [bodyType, body]: [string, Uint8Array],
    [metadataType, metadata]: [string, Uint8Array],
  ): void {
    if (checkpoint.v < 4) return this.inflight.forget(threadId); // older formats migrate pending sends on read
    const changed = new Map<string, KnownChannel>();
    blobs.forEach((b, i) => {
      const list = lists[i];
      // the chunks are joined only if the view is read (most are not: the next run's read usually finds the writes settled)
      const load =
        list !== undefined
          ? async () => list.slice()
          : () =>
              this.serde.loadsTyped(
                b.type,
                b.chunks === undefined
                  ? b.bytes
                  : joinChunks(
                      b.chunks.map((c) => c.bytes),
                      b.bytes,
                    ),
              );
      changed.set(b.channel, { version: b.version, load });
    });
    const noValue = new Set(Object.keys(newVersions).filter((channel) => !changed.has(channel)));
    const epoch = this.chains.fenceOf(threadId)?.epoch;
    this.inflight.put(threadId, epoch, { id: checkpoint.id, parentId, bodyType, body, metadataType, metadata }, versions, changed, noValue);
  }

  /** the put on its own: resends every chunk when one it skipped is missing; answers the committed row */
  private async writeCheckpoint(threadId: string, ns: string, checkpointId: string, fixed: unknown[], blobs: EncodedBlob[], fence?: Fence): Promise<PutRow> {
    for (let attempt = 0; ; attempt++) {
      // chunks known stored are not sent, only checked (all are sent on the retry)
      const values = this.putValues(threadId, ns, fixed, blobs, attempt === 0);
      const result =
        fence === undefined
          ? await this.pool.query<PutRow>({ ...PUT_CHECKPOINT, values })
          : await this.pool.query<PutRow>({ ...PUT_CHECKPOINT_FENCED, values: [...values, ...fenceValues(fence)] });
      if (fence !== undefined) this.chains.checkHeld(fence, result.rows[0].held);
      if (result.rows[0].missing === 0) return result.rows[0];
      this.storedChunks.forget(threadId);
      if (attempt > 0) throw new TroupeError("INTERNAL", `checkpoint ${checkpointId} of thread ${threadId}: its message chunks vanished while it was written`);
    }
  }

  /** PUT_CHECKPOINT's parameters: `fixed` and the chunks to send ($19-$21) or, when `skipKnown`, check ($22-$23) */
  private putValues(threadId: string, ns: string, fixed: unknown[], blobs: EncodedBlob[], skipKnown: boolean): unknown[] {
    const { send, skipped } = this.chunksToSend(threadId, ns, blobs, skipKnown);
    return [
      ...fixed,
      send.map((s) => s.channel),
      send.map((s) => s.chunk.id),
      byteaArray(send.map((s) => s.chunk.bytes)),
      skipped.map((s) => s.channel),
      skipped.map((s) => s.id),
    ];
  }

  /** a put's chunks to send, and (`skipKnown`) those known stored, only checked */
  private chunksToSend(
    threadId: string,
    ns: string,
    blobs: EncodedBlob[],
    skipKnown: boolean,
  ): { send: { channel: string; chunk: MessageChunk }[]; skipped: { channel: string; id: string }[] } {
    const known = skipKnown ? this.storedChunks.of(threadId) : undefined;
    const send: { channel: string; chunk: MessageChunk }[] = [];
    const skipped: { channel: string; id: string }[] = [];
    for (const blob of blobs) {
      for (const chunk of blob.chunks ?? []) {
        if (known?.has(ns, blob.channel, chunk.id)) skipped.push({ channel: blob.channel, id: chunk.id });
        else send.push({ channel: blob.channel, chunk });
      }
    }
    return { send, skipped };
  }

  /** after a put committed: the message lists it wrote, under the stamps of their blob rows */
  private cacheWritten(threadId: string, ns: string, owner: string, blobs: EncodedBlob[], lists: (unknown[] | undefined)[], row: PutRow): void {
    const stamps = new Map<string, string>();
    (row.blob_channels ?? []).forEach((channel, i) => stamps.set(channel, row.blob_stamps![i]));
    blobs.forEach((b, i) => {
      const list = lists[i];
      const stamp = stamps.get(b.channel);
      const key = BlobCache.key(threadId, ns, b.channel, b.version, owner);
      if (list !== undefined && stamp !== undefined) this.blobCache.setOwned(key, threadId, Number(stamp), storedBytes(b), list);
    });
  }

  /** after a put committed: its chunks are stored */
  private noteChunksStored(threadId: string, ns: string, blobs: EncodedBlob[]): void {
    const noted = this.storedChunks.of(threadId);
    for (const blob of blobs)
      if (blob.chunks !== undefined)
        this.storedChunks.noteCommitted(
          threadId,
          noted,
          ns,
          blob.channel,
          blob.chunks.map((c) => c.id),
        );
  }

  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    const threadId = requireThreadId(config, "put writes");
    this.issued.throwIfRefused(executionOf(config));
    this.issued.throwFailed(threadId);
    const checkpointId = getCheckpointId(config);
    if (!checkpointId) throw new TroupeError("BAD_REQUEST", "putWrites needs configurable.checkpoint_id");
    if (writes.length === 0) return;
    const serialized = await Promise.all(writes.map(([, value]) => this.serde.dumpsTyped(value)));
    // one row per idx (a statement cannot touch a row twice): first-wins for regular writes, last for special ones
    const byIdx = new Map<number, number>();
    writes.forEach(([channel], i) => {
      const idx = WRITES_IDX_MAP[channel] ?? i;
      if (idx < 0 || !byIdx.has(idx)) byIdx.set(idx, i);
    });
    const rows = [...byIdx].map(([idx, i]) => ({ idx, channel: writes[i][0], type: serialized[i][0], blob: serialized[i][1] }));
    if (namespaceOf(config) === "")
      this.inflight.putWrites(
        threadId,
        checkpointId,
        rows.map((r) => ({ taskId, idx: r.idx, channel: r.channel, type: r.type, value: r.blob, taskPath: taskPath ?? "" })),
      );
    const item: PutWritesItem = {
      threadId,
      ns: namespaceOf(config),
      checkpointId,
      taskId,
      taskPath: taskPath ?? "",
      runId: runIdOf(undefined, config) ?? null,
      rows,
      fence: this.chains.fenceOf(threadId), // cluster mode: written only while this holding stands
    };
    const { fence } = item;
    const written = this.chains.issueStatement(threadId, {
      // made when sent on its own (merged, PUT_WRITES_MANY makes its own)
      query: () => {
        const values = [item.threadId, item.ns, checkpointId, taskId, item.taskPath, item.runId, ...writeColumns(rows)];
        return fence === undefined ? { ...PUT_WRITES.plain, values } : { ...PUT_WRITES.fenced, values: [...values, ...fenceValues(fence)] };
      },
      result: (r) => {
        if (fence !== undefined) this.chains.checkHeld(fence, r.rows[0]?.held);
      },
      // several putWrites in a batch: one statement
      merge: mergeable(PUT_WRITES_MANY, () => item),
    });
    this.issued.add(threadId, written);
  }

  async deleteThread(threadId: string): Promise<void> {
    await this.removingChunks(threadId, () =>
      this.transaction(threadId, async (client) => {
        for (const table of ["checkpoints", "checkpoint_writes", "checkpoint_blobs", "checkpoint_chunks"]) {
          await client.query(`DELETE FROM ${table} WHERE thread_id = $1`, [threadId]);
        }
      }),
    );
    this.issued.forget(threadId);
  }

  /**
   * Duplicates every checkpoint, pending write, blob and chunk of `fromThreadId` under
   * `toThreadId` (which should be empty), rewriting metadata.thread_id where present.
   */
  async copyThread(fromThreadId: string, toThreadId: string): Promise<void> {
    if (fromThreadId === toThreadId) throw new TroupeError("BAD_REQUEST", "copyThread needs two different thread ids");
    await this.issued.settled(fromThreadId); // the source's issued writes are in the copy (its own chain is not this one)
    // on a cluster node fenced by the source's lease: the copy is the source's actor's write
    await this.transaction({ threadId: toThreadId, fencedBy: fromThreadId }, async (client) => {
      const rows = await client.query<{ checkpoint_ns: string; checkpoint_id: string; metadata_type: string; metadata: Buffer }>(
        "SELECT checkpoint_ns, checkpoint_id, metadata_type, metadata FROM checkpoints WHERE thread_id = $1",
        [fromThreadId],
      );
      await client.query(
        `INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, type, checkpoint,
          metadata_type, metadata, metadata_json, blob_refs)
        SELECT $2, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, type, checkpoint, metadata_type, metadata, metadata_json, blob_refs
        FROM checkpoints WHERE thread_id = $1`,
        [fromThreadId, toThreadId],
      );
      for (const row of rows.rows) {
        const metadata: unknown = await this.serde.loadsTyped(row.metadata_type, row.metadata);
        if (metadata === null || typeof metadata !== "object" || !("thread_id" in metadata)) continue;
        const [metadataType, bytes] = await this.serde.dumpsTyped({ ...metadata, thread_id: toThreadId });
        await client.query(
          "UPDATE checkpoints SET metadata_type = $4, metadata = $5, metadata_json = $6::jsonb WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3",
          [toThreadId, row.checkpoint_ns, row.checkpoint_id, metadataType, bytes, metadataJsonOf(metadataType, bytes)],
        );
      }
      await client.query(
        `INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path, run_id)
        SELECT $2, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path, run_id FROM checkpoint_writes WHERE thread_id = $1`,
        [fromThreadId, toThreadId],
      );
      await client.query(
        `INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, owner, type, blob, chunks)
        SELECT $2, checkpoint_ns, channel, version, owner, type, blob, chunks FROM checkpoint_blobs WHERE thread_id = $1`,
        [fromThreadId, toThreadId],
      );
      await client.query(
        `INSERT INTO checkpoint_chunks (thread_id, checkpoint_ns, channel, chunk_id, bytes)
        SELECT $2, checkpoint_ns, channel, chunk_id, bytes FROM checkpoint_chunks WHERE thread_id = $1`,
        [fromThreadId, toThreadId],
      );
    });
  }

  /**
   * Prune strategy keep_latest: keeps the newest checkpoint of every namespace of the thread (its
   * pending writes and the values it names) and removes everything older. The kept checkpoints
   * lose their parent link. Returns how many checkpoints went.
   */
  async pruneToLatest(threadId: string): Promise<number> {
    return this.removingChunks(threadId, () =>
      this.transaction(threadId, async (client) => {
        const removed = await client.query(
          `DELETE FROM checkpoints c WHERE c.thread_id = $1 AND c.checkpoint_id <> (
          SELECT max(l.checkpoint_id) FROM checkpoints l WHERE l.thread_id = c.thread_id AND l.checkpoint_ns = c.checkpoint_ns)`,
          [threadId],
        );
        await client.query("UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE thread_id = $1", [threadId]);
        await client.query(
          `DELETE FROM checkpoint_writes w WHERE w.thread_id = $1 AND NOT EXISTS (
          SELECT 1 FROM checkpoints c WHERE c.thread_id = w.thread_id AND c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = w.checkpoint_id)`,
          [threadId],
        );
        await this.collectUnnamed(client, threadId);
        return removed.rowCount ?? 0;
      }),
    );
  }

  /** Whether the thread has that checkpoint, without reading its values. */
  async hasCheckpoint(threadId: string, ns: string, checkpointId: string): Promise<boolean> {
    if (hasNul(ns, checkpointId)) return false;
    await this.issued.settled(threadId);
    const result = await this.pool.query<{ found: boolean }>(
      "SELECT EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3) AS found",
      [threadId, ns, checkpointId],
    );
    return result.rows[0].found;
  }

  /** Whether any checkpoint of the thread was written by the run (crash recovery: resume vs replay). */
  async hasCheckpointOfRun(threadId: string, runId: string): Promise<boolean> {
    await this.issued.settled(threadId);
    const result = await this.pool.query<{ found: boolean }>("SELECT EXISTS (SELECT 1 FROM checkpoints WHERE thread_id = $1 AND run_id = $2) AS found", [
      threadId,
      runId,
    ]);
    return result.rows[0].found;
  }

  /**
   * Rollback: removes the thread's checkpoints of the run with their writes, the writes the run
   * left on other checkpoints, and the values no remaining checkpoint names. Returns how many
   * checkpoints went.
   */
  async deleteCheckpointsOfRun(threadId: string, runId: string): Promise<number> {
    return this.removingChunks(threadId, () =>
      this.transaction(threadId, async (client) => {
        const removed = await client.query<{ checkpoint_ns: string; checkpoint_id: string }>(
          "DELETE FROM checkpoints WHERE thread_id = $1 AND run_id = $2 RETURNING checkpoint_ns, checkpoint_id",
          [threadId, runId],
        );
        await client.query(
          `DELETE FROM checkpoint_writes w USING unnest($2::text[], $3::text[]) gone(checkpoint_ns, checkpoint_id)
          WHERE w.thread_id = $1 AND w.checkpoint_ns = gone.checkpoint_ns AND w.checkpoint_id = gone.checkpoint_id`,
          [threadId, removed.rows.map((r) => r.checkpoint_ns), removed.rows.map((r) => r.checkpoint_id)],
        );
        await client.query("DELETE FROM checkpoint_writes WHERE thread_id = $1 AND run_id = $2", [threadId, runId]);
        await this.collectUnnamed(client, threadId);
        return removed.rowCount ?? 0;
      }),
    );
  }

  /**
   * Shallow-merges `patch` into the metadata of a thread's latest root checkpoint (or of
   * `checkpointId`); false when the thread has no such checkpoint.
   */
  async patchMetadata(threadId: string, patch: Record<string, unknown>, checkpointId?: string): Promise<boolean> {
    if (hasNul(checkpointId)) return false;
    return this.transaction(threadId, async (client) => {
      const found = await client.query<{ checkpoint_id: string; metadata_type: string; metadata: Buffer }>(
        checkpointId
          ? "SELECT checkpoint_id, metadata_type, metadata FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = '' AND checkpoint_id = $2 FOR UPDATE"
          : "SELECT checkpoint_id, metadata_type, metadata FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT 1 FOR UPDATE",
        checkpointId ? [threadId, checkpointId] : [threadId],
      );
      const row = found.rows[0];
      if (row === undefined) return false;
      const metadata = (await this.serde.loadsTyped(row.metadata_type, row.metadata)) as Record<string, unknown>;
      const [metadataType, bytes] = await this.serde.dumpsTyped({ ...metadata, ...patch });
      await client.query(
        "UPDATE checkpoints SET metadata_type = $3, metadata = $4, metadata_json = $5::jsonb WHERE thread_id = $1 AND checkpoint_ns = '' AND checkpoint_id = $2",
        [threadId, row.checkpoint_id, metadataType, bytes, metadataJsonOf(metadataType, bytes)],
      );
      return true;
    });
  }

  /** Cluster: no root checkpoint as read when this node took the thread's lease (ThreadCheckpointOps; inflight-checkpoints.ts). */
  learnNoCheckpoints(threadId: string, epoch: number): void {
    // the holding the saver writes under now: a late message of an earlier one teaches nothing
    if (this.chains.fenceOf(threadId)?.epoch === epoch) this.inflight.learntNoCheckpoints(threadId, epoch);
  }

  /** Writes of the thread issued from now on go to the database only once `until` settles (refuseUntil: ThreadWriteChains.hold). */
  holdWritesUntil(threadId: string, until: Promise<unknown>, refuseUntil?: Promise<unknown>): void {
    this.chains.hold(threadId, until, refuseUntil);
  }

  refuseExecution(execution: string): void {
    this.issued.refuseExecution(execution);
  }

  /**
   * Resolves once the thread's (no thread: every thread's) issued checkpoint writes settled;
   * rejects with the error of one that failed since the last report.
   */
  flush(threadId?: string): Promise<void> {
    return threadId === undefined ? this.issued.settledAll() : this.issued.settled(threadId);
  }

  /** Inside a transaction that removed checkpoints: their values and chunks nothing names any more. */
  private async collectUnnamed(client: pg.PoolClient, threadId: string): Promise<void> {
    const slots = await client.query<{ checkpoint_ns: string; channel: string }>(COLLECT_UNNAMED_BLOBS, [threadId]);
    if (slots.rows.length === 0) return;
    await client.query(COLLECT_UNNAMED_CHUNKS, [threadId, slots.rows.map((s) => s.checkpoint_ns), slots.rows.map((s) => s.channel)]);
  }

  /** What is known stored of the thread's chunks is forgotten before and after a removal. */
  private async removingChunks<T>(threadId: string, remove: () => Promise<T>): Promise<T> {
    this.storedChunks.forget(threadId);
    this.blobCache.removeThread(threadId); // (memory only: stamps keep removed values from being served)
    try {
      return await remove();
    } finally {
      this.storedChunks.forget(threadId);
    }
  }

  /**
   * A transaction writing the thread's checkpoints, in its write chain's order; on a cluster node
   * fenced by the thread's lease (or by `fencedBy`'s: a copy is its source's write).
   */
  private transaction<T>(thread: string | { threadId: string; fencedBy: string }, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const { threadId, fencedBy } = typeof thread === "string" ? { threadId: thread, fencedBy: thread } : thread;
    this.inflight.forget(threadId); // what the view knows no longer holds once this commits
    return this.chains.transaction(this.pool, threadId, work, fencedBy);
  }

  private async encodeBlob(channel: string, version: string, value: unknown): Promise<EncodedBlob> {
    const chunked = await this.messageSerde.dumpsChunked(value);
    if (chunked !== undefined) return { channel, version, type: "json", bytes: chunked.tail, chunks: chunked.chunks };
    const [type, bytes] = await this.serde.dumpsTyped(value);
    return { channel, version, type, bytes, chunks: undefined };
  }

  private async toTuple(row: TupleRow, loadedMetadata?: CheckpointMetadata): Promise<CheckpointTuple> {
    const { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: id } = row;
    if (!row.complete) throw new TroupeError("INTERNAL", `checkpoint data of thread ${threadId} is damaged: a message chunk of checkpoint ${id} is missing`);
    const body = (await this.serde.loadsTyped(row.type, row.checkpoint)) as StoredCheckpointBody;
    const channelVersions = body.channel_versions ?? {};
    const values: Record<string, unknown> = {};
    const channels = row.channels ?? [];
    const blobs = splitBytes(row.blobs, row.blob_lengths);
    for (let i = 0; i < channels.length; i++) {
      const channel = channels[i];
      // a ref whose version is not the checkpoint's names no value of it
      if (!Object.hasOwn(channelVersions, channel) || versionText(channelVersions[channel]) !== row.versions![i]) continue;
      values[channel] = await this.channelValue(threadId, ns, channel, row, i, blobs[i]);
    }
    const checkpoint: Checkpoint = { ...body, channel_versions: channelVersions, channel_values: values };
    if (checkpoint.v < 4 && row.parent_checkpoint_id !== null) await this.migratePendingSends(checkpoint, threadId, ns, row.parent_checkpoint_id);
    const { config, parentConfig } = tupleConfigs(threadId, ns, id, row.parent_checkpoint_id);
    const tuple: CheckpointTuple = {
      config,
      checkpoint,
      metadata: loadedMetadata ?? ((await this.serde.loadsTyped(row.metadata_type, row.metadata)) as CheckpointMetadata),
      pendingWrites: await this.sortedWrites(
        splitBytes(row.write_blobs, row.write_blob_lengths).map((blob, i): WriteRow => ({
          task_id: row.task_ids![i],
          idx: row.idxs![i],
          channel: row.write_channels![i],
          type: row.write_types![i],
          blob,
          task_path: row.task_paths![i],
        })),
      ),
    };
    if (parentConfig !== undefined) tuple.parentConfig = parentConfig;
    return tuple;
  }

  /** The value of a tuple row's i-th channel: from the blob cache while its blob row is unchanged. */
  private async channelValue(threadId: string, ns: string, channel: string, row: TupleRow, i: number, bytes: Buffer): Promise<unknown> {
    const key = BlobCache.key(threadId, ns, channel, row.versions![i], row.owners![i]);
    const stamp = Number(row.stamps![i]);
    const cached = this.blobCache.get(key, stamp);
    if (cached !== undefined) return cached;
    const value = await this.serde.loadsTyped(row.types![i], bytes);
    if (this.blobCache.accepts(bytes.byteLength)) this.blobCache.fill(key, threadId, stamp, bytes.byteLength, value);
    return value;
  }

  /** Pending writes in writesSortKey order (the order live execution applies them). */
  private sortedWrites(rows: WriteRow[]): Promise<CheckpointPendingWrite[]> {
    return revivePendingWrites(
      this.serde,
      rows.map((row): StoredPendingWrite => ({
        taskId: row.task_id,
        idx: row.idx,
        channel: row.channel,
        type: row.type,
        value: row.blob,
        taskPath: row.task_path,
      })),
    );
  }

  /** Checkpoints older than format v4 kept pending sends as TASKS writes on their parent. */
  private async migratePendingSends(checkpoint: Checkpoint, threadId: string, ns: string, parentId: string): Promise<void> {
    const rows = await this.pool.query<WriteRow>({ ...GET_WRITES, values: [threadId, ns, parentId] });
    migratePendingSends(checkpoint, await this.sortedWrites(rows.rows), () => this.getNextVersion(undefined));
  }
}

/**
 * Whether a text a client chose (a checkpoint id or namespace from a config) holds a NUL: Postgres
 * text cannot, so no stored row matches it (and sending it fails the statement).
 */
function hasNul(...values: unknown[]): boolean {
  return values.some((v) => typeof v === "string" && v.includes("\u0000"));
}

/** A channel version as stored: its JSON text, so 1 and "1" stay different versions. */
function versionText(version: unknown): string {
  return JSON.stringify(version);
}

/** PUT_WRITES' row columns ($7-$10) */
function writeColumns(rows: PutWritesItem["rows"]): unknown[] {
  return [rows.map((r) => r.idx), rows.map((r) => r.channel), rows.map((r) => r.type), byteaArray(rows.map((r) => r.blob))];
}

/** Values sent as one bytea, cut by their lengths (views into `joined`, no copy). */
function splitBytes(joined: Buffer | null, lengths: number[] | null): Buffer[] {
  const parts: Buffer[] = [];
  let at = 0;
  for (const n of lengths ?? []) {
    parts.push(joined!.subarray(at, at + n));
    at += n;
  }
  return parts;
}

/** Bytes a blob takes stored (tail and chunks): the cache's cost estimate. */
function storedBytes(blob: EncodedBlob): number {
  let n = blob.bytes.byteLength;
  for (const chunk of blob.chunks ?? []) n += chunk.bytes.byteLength;
  return n;
}

function keyOf(threadId: string, ns: string, id: string): string {
  return JSON.stringify([threadId, ns, id]);
}

const decoder = new TextDecoder();

/**
 * The metadata as jsonb for the containment index, when its serde bytes are plain JSON that
 * Postgres keeps as is: not LangChain objects (revived differently), not NUL characters (jsonb
 * refuses them). null otherwise: such rows are always checked by matchesFilter.
 */
function metadataJsonOf(type: string, bytes: Uint8Array): string | null {
  if (type !== "json") return null;
  const text = decoder.decode(bytes);
  if (text.includes('"lc"') || text.includes("\\u0000")) return null;
  return text;
}

/** The filter as a containment query, or undefined when JSON cannot express it exactly. */
function containmentOf(filter: Record<string, unknown>): string | undefined {
  const keys = Object.keys(filter);
  if (keys.length === 0) return undefined;
  for (const key of keys) if (filter[key] === undefined) return undefined;
  const text = JSON.stringify(filter);
  return text.includes("\\u0000") ? undefined : text;
}
