// Which message-list chunks (message-chunks.ts) are known to be in LMDB, per thread and slot, so a
// put of a long list writes only its new chunks. Without it every put re-wrote every chunk of
// the list as a conditional put: ~30 lmdb-js write instructions per step on a 2,000-message
// thread, the largest part of the checkpointer's CPU.
// Only commits count (a queued write may still fail), and anything that removes chunks of a
// thread forgets the thread, before and after its removal; knowledge noted for a forgotten thread
// is dropped. Bounded: the least recently used threads are forgotten first (then their chunks
// are just written again, as conditional puts).

/** The chunk ids known committed in one thread, by namespace and channel. */
export class ThreadChunks {
  private readonly slots = new Map<string, Set<string>>();

  has(ns: string, channel: string, id: string): boolean {
    return this.slots.get(slotKey(ns, channel))?.has(id) ?? false;
  }

  add(ns: string, channel: string, ids: Iterable<string>): void {
    const key = slotKey(ns, channel);
    let known = this.slots.get(key);
    if (known === undefined) this.slots.set(key, (known = new Set()));
    for (const id of ids) known.add(id);
  }
}

function slotKey(ns: string, channel: string): string {
  return `${ns}\u0000${channel}`;
}

export class StoredChunks {
  private readonly threads = new Map<string, ThreadChunks>();

  constructor(private readonly maxThreads = 1024) {}

  /**
   * The thread's current knowledge (created if none). Hand it back to `noteCommitted` once the
   * write it was taken for commits: if the thread was forgotten meanwhile, the note is dropped.
   */
  of(threadId: string): ThreadChunks {
    let known = this.threads.get(threadId);
    if (known === undefined) {
      known = new ThreadChunks();
      if (this.threads.size >= this.maxThreads) {
        const oldest = this.threads.keys().next().value;
        if (oldest !== undefined) this.threads.delete(oldest);
      }
    } else {
      this.threads.delete(threadId); // re-inserted below: most recently used last
    }
    this.threads.set(threadId, known);
    return known;
  }

  /** Records chunks whose write committed, unless the thread was forgotten since `known` was taken. */
  noteCommitted(threadId: string, known: ThreadChunks, ns: string, channel: string, ids: Iterable<string>): void {
    if (this.threads.get(threadId) === known) known.add(ns, channel, ids);
  }

  /** Chunks of the thread may be removed: nothing known of it holds any more. */
  forget(threadId: string): void {
    this.threads.delete(threadId);
  }
}
