// What the Postgres savers know of a thread's latest root checkpoint while its writes are still
// in flight, so the thread's next run reads it without waiting for them to commit (the LMDB
// saver's pending view, pending-view.ts, on Postgres).
/*
 * Why: puts resolve once issued (issued-writes.ts) and a read of the thread waits for its issued
 * writes to settle. The next run on a busy thread starts by reading the latest checkpoint, so every
 * queued run waited for the previous run's last commit and then paid a read round trip.
 *
 * A view is served (getTuple of the root namespace, latest or by its id) only while the thread has
 * writes in flight, under the lease holding it was made under (cluster mode: the fence's epoch), and
 * it is built only from a put whose parent is the checkpoint the savers last knew as latest: the
 * view of the previous put, or the tuple a database read returned (its rows give the unchanged
 * channels). Any other write to the thread (a transaction: delete, copy, prune, rollback, metadata
 * patch) forgets the thread, and a put whose parent is not the known latest ends the view; then
 * reads wait for the commit as before. Once the writes settled the view stays only as the known
 * latest a next put can start from (not served: the database is the truth again).
 * Values are kept as the read would rebuild them (the put's serde bytes, revived on every read, or
 * the put's private copy of a message list as the blob cache would hand it out), so a served tuple
 * never shares objects with the graph that put it.
 */
import type { CheckpointTuple, SerializerProtocol } from "@langchain/langgraph-checkpoint";
import { tupleFromSerialized, type StoredPendingWrite } from "../checkpoints/tuple.ts";
import { addPendingWrites } from "../checkpoints/pending-view.ts";

/** How a known checkpoint's channel value is produced again (each call a fresh value). */
export interface KnownChannel {
  /** the version as stored (its JSON text) */
  version: string;
  /** undefined: the version has no value (no blob), so the read returns none */
  load: (() => Promise<unknown>) | undefined;
}

export interface KnownCheckpoint {
  id: string;
  parentId: string | null;
  /** the lease epoch it was learnt under (cluster mode), else undefined */
  epoch: number | undefined;
  bodyType: string;
  body: Uint8Array;
  metadataType: string;
  metadata: Uint8Array;
  channels: Map<string, KnownChannel>;
  /** pending writes put on it since (a put's view only; a read's tuple is never served) */
  writes: Map<string, StoredPendingWrite>;
  /** built from a put whose writes are in flight: may be served */
  servable: boolean;
  /**
   * served even with nothing in flight: exactly what the database holds while the holding lasts
   * (learntNoCheckpoints: none, read as the lease was taken; only this holding writes the thread)
   */
  exact?: boolean;
}

/** Threads' known latest root checkpoints; bounded, as a read's rows are kept alive by it. */
const MAX_THREADS = 512;

const perChains = new WeakMap<object, InflightCheckpoints>();

export class InflightCheckpoints {
  private readonly known = new Map<string, KnownCheckpoint>();

  /** one per storage (its write chains), shared by every saver on it, like IssuedCheckpointWrites */
  static of(chains: object): InflightCheckpoints {
    let views = perChains.get(chains);
    if (views === undefined) perChains.set(chains, (views = new InflightCheckpoints()));
    return views;
  }

  /** the view to serve for the thread now, if any */
  servable(threadId: string, epoch: number | undefined, inFlight: boolean): KnownCheckpoint | undefined {
    const k = this.known.get(threadId);
    if (k === undefined || !k.servable) return undefined;
    if (k.epoch !== epoch) {
      this.known.delete(threadId); // learnt under another holding of the thread
      return undefined;
    }
    return inFlight || k.exact === true ? k : undefined;
  }

  /** a database read found the thread without any root checkpoint (no writes in flight) */
  learntEmpty(threadId: string, epoch: number | undefined): void {
    this.set(threadId, emptyCheckpoint(epoch, false));
  }

  /**
   * Cluster: the thread had no root checkpoint as read right after this node took its lease under
   * `epoch`. Its checkpoints are written only by that holding (the fence), i.e. through this
   * storage's savers, each of which replaces (put) or forgets (transactions) this entry, so until
   * then "none" is exact and is served without a read: the thread's first run skips its checkpoint
   * read. Another holding (the epoch) drops it. (Served as the empty view, id "": getTuple.)
   */
  learntNoCheckpoints(threadId: string, epoch: number): void {
    this.set(threadId, emptyCheckpoint(epoch, true));
  }

  /** a database read returned the thread's latest root checkpoint (no writes in flight) */
  learnt(threadId: string, k: Omit<KnownCheckpoint, "servable" | "writes">): void {
    this.set(threadId, { ...k, writes: new Map(), servable: false });
  }

  /**
   * A root checkpoint put: the new latest when its parent is the known latest of the same holding
   * (whose channels are all known: the put statement inherits from it alone); otherwise the thread
   * is forgotten (reads wait).
   * `versions`: the checkpoint's channel versions as stored; `changed`: the channels the put wrote a
   * value for; `noValue`: new versions without one.
   */
  put(
    threadId: string,
    epoch: number | undefined,
    next: Pick<KnownCheckpoint, "id" | "parentId" | "bodyType" | "body" | "metadataType" | "metadata">,
    versions: Record<string, string>,
    changed: Map<string, KnownChannel>,
    noValue: Set<string>,
  ): void {
    const parent = this.known.get(threadId);
    // (a thread read as having no checkpoint is known with id "": a first put's parent is null)
    if (parent === undefined || parent.epoch !== epoch || parent.id !== (next.parentId ?? "") || next.id <= parent.id) {
      this.known.delete(threadId);
      return;
    }
    const channels = new Map<string, KnownChannel>();
    for (const [channel, version] of Object.entries(versions)) {
      const own = changed.get(channel);
      if (own !== undefined) channels.set(channel, own);
      else if (noValue.has(channel))
        channels.set(channel, { version, load: undefined }); // no blob, as the read finds
      else {
        // the database inherits the parent's value of the same version, else names none
        const inherited = parent.channels.get(channel);
        channels.set(channel, inherited !== undefined && inherited.version === version ? inherited : { version, load: undefined });
      }
    }
    this.set(threadId, { ...next, epoch, channels, writes: new Map(), servable: true });
  }

  /** pending writes put on a root checkpoint */
  putWrites(threadId: string, checkpointId: string, records: StoredPendingWrite[]): void {
    const k = this.known.get(threadId);
    if (k === undefined || k.id !== checkpointId) return; // writes on another checkpoint: not in the latest's tuple
    if (!k.servable) {
      this.known.delete(threadId); // a read's tuple does not track its writes
      return;
    }
    addPendingWrites(k, records);
  }

  /** any other write to the thread's checkpoints */
  forget(threadId: string): void {
    this.known.delete(threadId);
  }

  /** the tuple a read of `k` would return once its writes committed */
  static async tuple(serde: SerializerProtocol, threadId: string, k: KnownCheckpoint): Promise<CheckpointTuple> {
    const values: Record<string, unknown> = {};
    for (const [channel, known] of k.channels) if (known.load !== undefined) values[channel] = await known.load();
    return tupleFromSerialized(serde, threadId, k, values, [...k.writes.values()]);
  }

  private set(threadId: string, k: KnownCheckpoint): void {
    this.known.delete(threadId); // re-inserted last: the map's order is by last change
    this.known.set(threadId, k);
    if (this.known.size > MAX_THREADS) this.known.delete(this.known.keys().next().value as string);
  }
}

/** A thread with no root checkpoint, as known (id ""): a first put's parent (null) matches it. */
function emptyCheckpoint(epoch: number | undefined, exact: boolean): KnownCheckpoint {
  return {
    id: "",
    parentId: null,
    epoch,
    bodyType: "",
    body: new Uint8Array(),
    metadataType: "",
    metadata: new Uint8Array(),
    channels: new Map(),
    writes: new Map(),
    servable: exact,
    exact,
  };
}
