// Run creates of one thread leave for its shard in the order their run ids were taken. A create
// awaits storage (the assistant, custom auth) between taking its id and sending; on PostgreSQL
// those reads finish in any order (each on its own connection), so without this a later id could
// reach the thread's actor first and run first, while runs list (and sort) by id.

interface Turn {
  /** resolves when every earlier create of the thread has been sent (or given up) */
  ready: Promise<void>;
  /** this create has been sent or failed: the next may go */
  done(): void;
}

export class CreateOrder {
  private readonly tails = new Map<string, Promise<void>>();

  /** Take the next turn on `threadId`: call in the same synchronous step that takes the run id. */
  take(threadId: string): Turn {
    const prev = this.tails.get(threadId);
    let done!: () => void;
    const mine = new Promise<void>((r) => (done = r));
    this.tails.set(threadId, mine);
    // the last turn out clears the map entry (no entry per thread kept)
    void mine.then(() => {
      if (this.tails.get(threadId) === mine) this.tails.delete(threadId);
    });
    return { ready: prev ?? Promise.resolve(), done };
  }
}
