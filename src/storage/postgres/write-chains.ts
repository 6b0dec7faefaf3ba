// Per-thread write order on Postgres: the storage port promises that writes issued for one thread
// commit in the order they were issued (LMDB gets it from its single write queue). Each thread has
// a chain: a write is sent once every write issued before it for the thread has settled, so the
// actor can issue a run's finish and the next run's writes without waiting, and they still commit
// in that order. Threads do not wait for each other. The record writes and the checkpointer of a
// storage share one ThreadWriteChains.
//
// Writes that queue up behind one in flight (a run's checkpoints and pending writes, a burst of
// enqueued creates) leave together when their turn comes: one transaction, its statements
// pipelined on one connection (one round trip, one commit to flush instead of one per write). A
// batch that fails in any way was rolled back whole: its writes then run again one at a time, as
// they would have without batching, and each settles with its own outcome.
//
// Cluster mode: a thread's run and checkpoint writes carry the holding of its lease (fence) in
// their own statement (fenceSql: a lease-row lookup with FOR SHARE and a condition on each write,
// docs/CLUSTER.md "Fencing"). A refused write writes nothing and answers held = false: a value, not
// an error, so it does not abort the batch it was sent in; only its own promise rejects.
import type pg from "pg";
import type { Fence } from "../../cluster/fence.ts";
import { TroupeError } from "../../errors.ts";
import type { ThreadFences } from "../port.ts";

const settle = (): void => undefined;

/** A write that is one statement: it may share a transaction with the thread's neighbouring writes. */
export interface ChainStatement<T> {
  /** the statement, built when it is sent */
  query(): pg.QueryConfig;
  /** the write's outcome from its committed result */
  result(r: pg.QueryResult): T;
  /** how the write runs on its own (default: the statement on the pool, autocommitted) */
  alone?: () => Promise<T>;
}

interface Write {
  kind: "write";
  statement: ChainStatement<unknown> | undefined;
  alone: () => Promise<unknown>;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

interface Hold {
  kind: "hold";
  until: Promise<unknown>;
}

type Entry = Write | Hold;

interface Chain {
  queue: Entry[];
  running: boolean;
  /** settles once every write issued so far has settled */
  tail: Promise<void>;
}

/** Most statements sent in one batch. */
const MAX_BATCH = 64;

export class ThreadWriteChains implements ThreadFences {
  private readonly chains = new Map<string, Chain>();
  /** cluster mode: thread id → epoch of the lease its writes are fenced by */
  private readonly epochs = new Map<string, number>();
  private refusedListener: ((threadId: string) => void) | undefined;

  /** `pool`: where batches go (a pool of pipelining clients); none: every write runs on its own */
  constructor(private readonly pool?: pg.Pool) {}

  fence(threadId: string, epoch: number): void {
    this.epochs.set(threadId, epoch);
  }

  unfence(threadId: string): void {
    this.epochs.delete(threadId);
  }

  onRefused(listener: (threadId: string) => void): void {
    this.refusedListener = listener;
  }

  /** The holding a write of the thread issued now must carry (cluster mode); undefined: unfenced. */
  fenceOf(threadId: string): Fence | undefined {
    const epoch = this.epochs.get(threadId);
    return epoch === undefined ? undefined : { threadId, epoch };
  }

  /** A fenced statement's answer (its `held` column): a refusal tells the listener and rejects that write (UNAVAILABLE). */
  checkHeld(fence: Fence, held: unknown): void {
    if (held === true) return;
    this.refusedListener?.(fence.threadId);
    throw new TroupeError("UNAVAILABLE", `thread ${fence.threadId}: this node no longer holds its lease (epoch ${fence.epoch}); the write was refused`);
  }

  /** runs `write` once every write issued before it for `threadId` has settled (either way) */
  issue<T>(threadId: string, write: () => Promise<T>): Promise<T> {
    return this.enqueue(threadId, undefined, write);
  }

  /** a one-statement write: as issue(), and sent with the writes queued next to it when it waited */
  issueStatement<T>(threadId: string, statement: ChainStatement<T>): Promise<T> {
    const pool = this.pool;
    const alone =
      statement.alone ??
      (async () => {
        if (pool === undefined) throw new Error("a statement write needs the chains' pool, or its own alone()");
        return statement.result(await pool.query(statement.query()));
      });
    return this.enqueue(threadId, statement, alone);
  }

  /** later writes of the thread wait for `until` to settle as well (holdWritesUntil) */
  hold(threadId: string, until: Promise<unknown>): void {
    const chain = this.chainOf(threadId);
    chain.queue.push({ kind: "hold", until });
    chain.tail = Promise.all([chain.tail, until.then(settle, settle)]).then(settle);
    this.start(threadId, chain);
  }

  /** settles once every write issued so far for the thread has settled */
  settled(threadId: string): Promise<void> {
    return this.chains.get(threadId)?.tail ?? Promise.resolve();
  }

  private enqueue<T>(threadId: string, statement: ChainStatement<T> | undefined, alone: () => Promise<T>): Promise<T> {
    const chain = this.chainOf(threadId);
    const result = new Promise<T>((resolve, reject) => {
      chain.queue.push({ kind: "write", statement: statement as ChainStatement<unknown> | undefined, alone, resolve: resolve as (v: unknown) => void, reject });
    });
    chain.tail = Promise.all([chain.tail, result.then(settle, settle)]).then(settle);
    this.start(threadId, chain);
    return result;
  }

  private chainOf(threadId: string): Chain {
    let chain = this.chains.get(threadId);
    if (chain === undefined) this.chains.set(threadId, (chain = { queue: [], running: false, tail: Promise.resolve() }));
    return chain;
  }

  private start(threadId: string, chain: Chain): void {
    if (chain.running) return;
    chain.running = true;
    void this.drain(threadId, chain);
  }

  /** sends the thread's writes in order until none is left, then forgets the chain */
  private async drain(threadId: string, chain: Chain): Promise<void> {
    while (chain.queue.length > 0) {
      const head = chain.queue[0];
      if (head.kind === "hold") {
        chain.queue.shift();
        await head.until.then(settle, settle);
        continue;
      }
      let n = 0;
      while (n < chain.queue.length && n < MAX_BATCH) {
        const e = chain.queue[n];
        if (e.kind !== "write" || e.statement === undefined) break;
        n++;
      }
      if (this.pool !== undefined && n >= 2) await this.batch(this.pool, chain.queue.splice(0, n) as Write[]);
      else {
        chain.queue.shift();
        await runAlone(head);
      }
    }
    chain.running = false;
    if (this.chains.get(threadId) === chain) this.chains.delete(threadId);
  }

  /** the writes in one transaction (one round trip); on any failure each of them again on its own */
  private async batch(pool: pg.Pool, writes: Write[]): Promise<void> {
    let results: pg.QueryResult[] | undefined;
    let client: pg.PoolClient | undefined;
    try {
      const queries = writes.map((w) => w.statement!.query());
      client = await pool.connect();
      const c = client;
      const sent: Promise<pg.QueryResult>[] = [c.query("BEGIN"), ...queries.map((q) => c.query(q)), c.query("COMMIT")];
      const settled = await Promise.allSettled(sent);
      const commit = settled[settled.length - 1];
      // a statement that failed aborted the transaction: COMMIT then answers ROLLBACK
      if (settled.every((s) => s.status === "fulfilled") && commit.status === "fulfilled" && commit.value.command === "COMMIT") {
        results = settled.slice(1, -1).map((s) => (s as PromiseFulfilledResult<pg.QueryResult>).value);
      }
      client.release();
    } catch (err) {
      client?.release(err instanceof Error ? err : new Error(String(err)));
    }
    if (results === undefined) {
      for (const w of writes) await runAlone(w);
      return;
    }
    writes.forEach((w, i) => {
      try {
        w.resolve(w.statement!.result(results[i]));
      } catch (err) {
        w.reject(err);
      }
    });
  }
}

async function runAlone(w: Write): Promise<void> {
  try {
    w.resolve(await w.alone());
  } catch (err) {
    w.reject(err);
  }
}
