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
//
// Group commit: while GROUPS_IN_FLIGHT transactions of this storage are in flight, the batches
// (and single statements) of other threads that become ready wait and then leave together, as
// one transaction (many threads busy at once: one connection and one commit instead of one per
// thread); when fewer are in flight a batch leaves at once (no added latency at low load). Each
// thread has at most one batch in flight, so a group
// never holds two writes of one thread out of order; if the group fails, each thread's batch runs
// again on its own (and from there, each write alone), so a failure is never another thread's.
import type pg from "pg";
import { FENCE_CHECK_OR_FAIL, fenceValues, isFenceRefusal, type Fence, type NamedStatement } from "../../cluster/fence.ts";
import { TroupeError } from "../../errors.ts";
import type { ThreadFences } from "../port.ts";
import { transaction } from "./transaction.ts";

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
  /** set: a rejected `until` fails the writes behind it, and the thread's writes issued until this settles */
  refuseUntil?: Promise<unknown>;
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
/** Most statements in one group of several threads' batches. */
const MAX_GROUP = 256;
/** Transactions in flight before ready batches wait to leave together. */
const GROUPS_IN_FLIGHT = 4;

/** A thread's batch waiting for its group: settles once every write of it settled. */
interface Submission {
  writes: Write[];
  done(): void;
}

export class ThreadWriteChains implements ThreadFences {
  private readonly chains = new Map<string, Chain>();
  /** cluster mode: thread id → epoch of the lease its writes are fenced by */
  private readonly epochs = new Map<string, number>();
  /** thread id → the error its writes fail with now (hold's refuseUntil) */
  private readonly refusals = new Map<string, Error>();
  private refusedListener: ((threadId: string, epoch: number) => void) | undefined;
  /** batches waiting for a transaction in flight to end, then sent together (group commit) */
  private ready: Submission[] = [];
  private groupsInFlight = 0;

  /** `pool`: where batches go (a pool of pipelining clients); none: every write runs on its own */
  constructor(private readonly pool?: pg.Pool) {}

  fence(threadId: string, epoch: number): void {
    this.epochs.set(threadId, epoch);
  }

  unfence(threadId: string): void {
    this.epochs.delete(threadId);
  }

  onRefused(listener: (threadId: string, epoch: number) => void): void {
    this.refusedListener = listener;
  }

  epochOf(threadId: string): number | undefined {
    return this.epochs.get(threadId);
  }

  /** The holding a write of the thread issued now must carry (cluster mode); undefined: unfenced. */
  fenceOf(threadId: string): Fence | undefined {
    const epoch = this.epochs.get(threadId);
    return epoch === undefined ? undefined : { threadId, epoch };
  }

  /** A fenced statement's answer (its `held` column): a refusal tells the listener and rejects that write (UNAVAILABLE). */
  checkHeld(fence: Fence, held: unknown): void {
    if (held !== true) throw this.refusal(fence);
  }

  /** A write of `fence` was refused: the listener is told; the error the write rejects with. */
  private refusal(fence: Fence): TroupeError {
    this.refusedListener?.(fence.threadId, fence.epoch);
    return new TroupeError("UNAVAILABLE", `thread ${fence.threadId}: this node no longer holds its lease (epoch ${fence.epoch}); the write was refused`);
  }

  /**
   * A write statement in its plain or fenced form (fencedStatements): fenced while the thread is,
   * with the holding of now; a refusal rejects it (checkHeld). `answer`: the write's outcome from
   * the statement's answer row (none: undefined).
   */
  issueWrite<T = undefined>(
    threadId: string,
    statement: { plain: NamedStatement; fenced: NamedStatement },
    values: unknown[],
    answer?: (row: Record<string, unknown> | undefined) => T,
  ): Promise<T> {
    const fence = this.fenceOf(threadId);
    const query = fence === undefined ? { ...statement.plain, values } : { ...statement.fenced, values: [...values, ...fenceValues(fence)] };
    return this.issueStatement(threadId, {
      query: () => query,
      result: (r) => {
        if (fence !== undefined) this.checkHeld(fence, r.rows[0]?.held);
        return answer === undefined ? (undefined as T) : answer(r.rows[0]);
      },
    });
  }

  /**
   * A transaction of several statements on the thread's chain (`pool`: where it runs). Fenced
   * while `fencedBy` (default: the thread itself) is, with the holding of now: FENCE_CHECK_OR_FAIL
   * goes with the COMMIT (pipelined: no round trip of its own); a refusal rolls the whole
   * transaction back and rejects it as a refused statement does.
   */
  transaction<T>(pool: pg.Pool, threadId: string, work: (client: pg.PoolClient) => Promise<T>, fencedBy = threadId): Promise<T> {
    const fence = this.fenceOf(fencedBy);
    const closing = fence && {
      query: { ...FENCE_CHECK_OR_FAIL, values: fenceValues(fence) },
      refused: (err: unknown) => (isFenceRefusal(err) ? this.refusal(fence) : undefined),
    };
    return this.issue(threadId, () => transaction(pool, work, closing));
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

  /**
   * later writes of the thread wait for `until` to settle as well (holdWritesUntil). With
   * `refuseUntil`, a rejected `until` fails the writes waiting behind it (none is sent), and every
   * write of the thread issued before `refuseUntil` settles fails at once with the same error.
   */
  hold(threadId: string, until: Promise<unknown>, refuseUntil?: Promise<unknown>): void {
    const chain = this.chainOf(threadId);
    chain.queue.push({ kind: "hold", until, refuseUntil });
    chain.tail = Promise.all([chain.tail, until.then(settle, settle)]).then(settle);
    this.start(threadId, chain);
  }

  /** settles once every write issued so far for the thread has settled */
  settled(threadId: string): Promise<void> {
    return this.chains.get(threadId)?.tail ?? Promise.resolve();
  }

  private enqueue<T>(threadId: string, statement: ChainStatement<T> | undefined, alone: () => Promise<T>): Promise<T> {
    const refusal = this.refusals.get(threadId);
    if (refusal !== undefined) return Promise.reject(refusal);
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
        const refusal = await head.until.then(
          () => undefined,
          (err: unknown) => (head.refuseUntil === undefined ? undefined : err instanceof Error ? err : new Error(String(err))),
        );
        if (refusal !== undefined) this.refuse(threadId, chain, refusal, head.refuseUntil!);
        // The writes issued in reaction to what released the hold (the actor's finish of the run
        // that ran meanwhile, creates waiting in its mailbox) come a few microtasks later: sent
        // once the microtask queue has drained (a nextTick), they leave with the writes the hold
        // kept, in one transaction instead of a second round trip; still before the actor's next
        // run starts (a setImmediate), whose graph would hold them back until it ends.
        else await new Promise<void>((resolve) => process.nextTick(resolve));
        continue;
      }
      let n = 0;
      while (n < chain.queue.length && n < MAX_BATCH) {
        const e = chain.queue[n];
        if (e.kind !== "write" || e.statement === undefined) break;
        n++;
      }
      if (this.pool !== undefined && n >= 1) await this.submit(chain.queue.splice(0, n) as Write[]);
      else {
        chain.queue.shift();
        await runAlone(head);
      }
    }
    chain.running = false;
    if (this.chains.get(threadId) === chain) this.chains.delete(threadId);
  }

  /** fails the writes queued and those issued until `until` settles */
  private refuse(threadId: string, chain: Chain, refusal: Error, until: Promise<unknown>): void {
    this.refusals.set(threadId, refusal);
    const lift = () => {
      if (this.refusals.get(threadId) === refusal) this.refusals.delete(threadId);
    };
    void until.then(lift, lift);
    const queued = chain.queue.splice(0);
    for (const e of queued) {
      if (e.kind === "write") e.reject(refusal);
      else chain.queue.push(e);
    }
  }

  /** a thread's batch: sent now, or with the next group when enough are in flight; settles once its writes settled */
  private submit(writes: Write[]): Promise<void> {
    return new Promise<void>((done) => {
      this.ready.push({ writes, done });
      if (this.groupsInFlight < GROUPS_IN_FLIGHT) this.sendReady();
    });
  }

  /** the batches ready: in groups of at most MAX_GROUP statements, one transaction each */
  private sendReady(): void {
    const ready = this.ready;
    this.ready = [];
    let group: Submission[] = [];
    let size = 0;
    const send = (subs: Submission[]) => {
      this.groupsInFlight++;
      void this.group(subs).finally(() => {
        this.groupsInFlight--;
        if (this.ready.length > 0 && this.groupsInFlight < GROUPS_IN_FLIGHT) this.sendReady();
      });
    };
    for (const sub of ready) {
      if (size > 0 && size + sub.writes.length > MAX_GROUP) {
        send(group);
        group = [];
        size = 0;
      }
      group.push(sub);
      size += sub.writes.length;
    }
    if (group.length > 0) send(group);
  }

  /** several threads' batches in one transaction; if it fails, each thread's batch again on its own */
  private async group(subs: Submission[]): Promise<void> {
    if (
      subs.length === 1 ||
      (await this.batch(
        this.pool!,
        subs.flatMap((s) => s.writes),
        false,
      ))
    ) {
      if (subs.length === 1) await this.batch(this.pool!, subs[0].writes, true);
      for (const sub of subs) sub.done();
      return;
    }
    await Promise.all(
      subs.map(async (sub) => {
        await this.batch(this.pool!, sub.writes, true);
        sub.done();
      }),
    );
  }

  /**
   * The writes in one transaction (one round trip): true once committed and each write settled.
   * On any failure, false — or, when `aloneAfter`, each write again on its own (its outcome
   * alone), then true. A single write alone runs as it would without batching.
   */
  private async batch(pool: pg.Pool, writes: Write[], aloneAfter: boolean): Promise<boolean> {
    if (writes.length === 1 && aloneAfter) {
      await runAlone(writes[0]);
      return true;
    }
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
      if (!aloneAfter) return false;
      for (const w of writes) await runAlone(w);
      return true;
    }
    writes.forEach((w, i) => {
      try {
        w.resolve(w.statement!.result(results[i]));
      } catch (err) {
        w.reject(err);
      }
    });
    return true;
  }
}

async function runAlone(w: Write): Promise<void> {
  try {
    w.resolve(await w.alone());
  } catch (err) {
    w.reject(err);
  }
}
