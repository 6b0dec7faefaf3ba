// The checkpoint writes an LMDB env has queued in this JS thread, per checkpoint thread: what
// read-your-writes waits for, the failures reported to the next read or write, the actor's holds
// (holdWritesUntil), and what puts may know without reading (pending view, queued bookkeeping).
// One per env and JS thread, shared by every saver on it (savers of several library copies).
import type { Storage } from "../env.ts";
import { TroupeError } from "../../errors.ts";
import type { PendingCheckpoint } from "./pending-view.ts";
import { QueuedThreadWrites } from "./queued-writes.ts";
import { StoredChunks } from "./stored-chunks.ts";

const queues = new WeakMap<object, CheckpointWriteQueue>();

export class CheckpointWriteQueue {
  /** per thread: the last queued write transaction (resolves when it and every earlier one committed) */
  readonly byThread = new Map<string, Promise<void>>();
  /** per thread: a queued write that failed, reported once by the next read, write or flush */
  readonly failed = new Map<string, Error>();
  /** per thread: its latest root checkpoint while writes are queued, when known (pending-view.ts) */
  readonly pending = new Map<string, PendingCheckpoint>();
  /** per thread with queued writes: what they write that a put needs to know (queued-writes.ts) */
  readonly queued = new Map<string, QueuedThreadWrites>();
  /** per thread: writes queued from now on are handed to lmdb-js only once this settles (holdWritesUntil) */
  readonly barriers = new Map<string, Promise<void>>();
  /** per thread: writes queued now fail with this (a barrier with refuseUntil was rejected) */
  readonly refusals = new Map<string, Error>();
  /** message-list chunks known committed, so puts do not write them again (stored-chunks.ts) */
  readonly storedChunks = new StoredChunks();

  /** The queue of the env `storage` belongs to, in this JS thread. */
  static of(storage: Storage): CheckpointWriteQueue {
    let queue = queues.get(storage.root);
    if (queue === undefined) queues.set(storage.root, (queue = new CheckpointWriteQueue()));
    return queue;
  }

  /** The thread's queued-write bookkeeping (kept until its queue drains). */
  queuedWritesOf(threadId: string): QueuedThreadWrites {
    let queued = this.queued.get(threadId);
    if (queued === undefined) this.queued.set(threadId, (queued = new QueuedThreadWrites()));
    return queued;
  }

  throwFailedWrite(threadId: string): void {
    const failed = this.failed.get(threadId);
    if (failed === undefined) return;
    this.failed.delete(threadId);
    throw new TroupeError("INTERNAL", `an earlier checkpoint write of thread ${threadId} failed: ${failed.message}`);
  }

  /**
   * Writes of the thread queued from now on are handed to lmdb-js only once `until` settles (they
   * still resolve at once, and reads see them as queued writes). The thread's actor holds them
   * while the previous run's final transaction commits: lmdb-js keeps a transaction open while
   * writes keep arriving, so the next run's checkpoints would otherwise keep that commit waiting
   * until the next run's own turn ends.
   */
  holdWritesUntil(threadId: string, until: Promise<unknown>, refuseUntil?: Promise<unknown>): void {
    const barrier = until.then(
      () => undefined,
      (err: unknown) => {
        if (refuseUntil === undefined) return;
        // the writes held fail (queueWrite: not issued), and so do the thread's writes queued until refuseUntil
        const refusal = err instanceof Error ? err : new Error(String(err));
        this.refusals.set(threadId, refusal);
        const lift = () => {
          if (this.refusals.get(threadId) === refusal) this.refusals.delete(threadId);
        };
        void refuseUntil.then(lift, lift);
        throw refusal;
      },
    );
    this.barriers.set(threadId, barrier);
    const forget = () => {
      if (this.barriers.get(threadId) === barrier) this.barriers.delete(threadId);
    };
    void barrier.then(forget, forget);
  }

  /**
   * Resolves when every write queued for the thread (or for all threads) has committed; rejects
   * with the error of a write that failed since the last report.
   */
  async flush(threadId?: string): Promise<void> {
    if (threadId === undefined) {
      await Promise.all(this.byThread.values());
      const [first] = this.failed.keys();
      if (first !== undefined) this.throwFailedWrite(first);
      return;
    }
    const queued = this.byThread.get(threadId);
    if (queued !== undefined) await queued;
    this.throwFailedWrite(threadId);
  }

  /**
   * Queues a write of the thread's checkpoint data. "batch": `write` only puts (conditional puts
   * included) and runs now, and lmdb-js' write thread carries the batch out on its own;
   * "transaction": `write` also reads, so the write thread calls it back on this JS thread (and
   * waits for it to be free) when the transaction starts. Returns the write's own outcome
   * (rejects when it failed; that is also reported through the queue).
   */
  queueWrite(storage: Storage, threadId: string, mode: "batch" | "transaction", write: () => void): Promise<unknown> {
    const { byThread, pending, failed } = this;
    const issue = (): Promise<unknown> => {
      try {
        return mode === "batch" ? storage.root.batch(write) : storage.root.transaction(write);
      } catch (err) {
        return Promise.reject(err); // reported like a failed commit
      }
    };
    const barrier = this.barriers.get(threadId);
    const refusal = this.refusals.get(threadId);
    const written = refusal !== undefined ? Promise.reject(refusal) : barrier === undefined ? issue() : barrier.then(issue);
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
      this.queued.delete(threadId);
    });
    return written;
  }
}
