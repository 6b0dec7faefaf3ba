// Per-thread write order on Postgres: the storage port promises that writes issued for one thread
// commit in the order they were issued (LMDB gets it from its single write queue). Each thread has
// a chain: a write is sent once every write issued before it for the thread has settled, so the
// actor can issue a run's finish and the next run's writes without waiting, and they still commit
// in that order. Threads do not wait for each other. The record writes and the checkpointer of a
// storage share one ThreadWriteChains.
const settle = (): void => undefined;

export class ThreadWriteChains {
  private readonly tails = new Map<string, Promise<void>>();

  /** runs `write` once every write issued before it for `threadId` has settled (either way) */
  issue<T>(threadId: string, write: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(threadId);
    const result = prev === undefined ? write() : prev.then(write);
    this.append(threadId, result);
    return result;
  }

  /** later writes of the thread wait for `until` to settle as well (holdWritesUntil) */
  hold(threadId: string, until: Promise<unknown>): void {
    const prev = this.tails.get(threadId);
    this.append(threadId, prev === undefined ? until : Promise.all([prev, until.then(settle, settle)]));
  }

  /** settles once every write issued so far for the thread has settled */
  settled(threadId: string): Promise<void> {
    return this.tails.get(threadId) ?? Promise.resolve();
  }

  private append(threadId: string, last: Promise<unknown>): void {
    const tail = last.then(settle, settle);
    this.tails.set(threadId, tail);
    void tail.then(() => {
      if (this.tails.get(threadId) === tail) this.tails.delete(threadId);
    });
  }
}
