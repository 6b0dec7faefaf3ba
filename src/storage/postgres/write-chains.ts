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
// Inside a batch, writes of one mergeable kind (checkpoint puts, pending writes, run ends, run
// creates, thread creates) leave as one statement for them all (MergeKind: multi-row, each
// write's row gated by its own fence, one answer row per write): a group's puts of 20 threads are
// one statement. Such a write joins the kind's latest statement in the batch, placed where the
// first of them stood, so it moves ahead of writes of other mergeable kinds (they commute: each
// writes tables the others neither write nor read) and of other threads' writes (threads' rows
// are disjoint), never ahead of a write of its own thread that is not mergeable, nor of one of
// its own kind (a write whose row the statement already writes starts the next statement). The
// creates write the thread's row as a run end does: their kinds are exclusive, never moved ahead
// of nor merged with another write of their thread. A batch of mergeable writes only (a run's
// last one: its puts, putWrites and end) is one statement of all its kinds' parts, sent without
// BEGIN/COMMIT (a statement is its own transaction): 1 statement instead of 7.
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
import { createHash } from "node:crypto";
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
  /** the write's outcome from its committed result (merged: the result holding its one answer row) */
  result(r: pg.QueryResult): T;
  /** how the write runs on its own (default: the statement on the pool, autocommitted) */
  alone?: () => Promise<T>;
  /** a write of a kind several of which a batch sends as one statement (mergeable()) */
  merge?: Mergeable;
}

/**
 * A kind of write a batch sends as one statement when several are in it. The statement is the
 * kind's CTEs; the last, `§answer`, answers one row per write (`ord`: the write's 1-based place in
 * the items, `held`: its fence held, then the kind's `answers`) and the write's result() gets its
 * row alone (rows[0]), with the columns its own statement answers. `§` stands before each CTE
 * name of the kind's own, so that a batch holding several kinds of them (and nothing else) sends
 * them all as one statement, each kind's names and parameters apart.
 */
export interface MergeKind<I> {
  /** the prepared statement's name (a statement of several kinds: troupe_batch(their names)) */
  name: string;
  /** false when `item` writes a row `items` already write (a statement may not touch a row twice): it starts the kind's next statement */
  accepts(items: readonly I[], item: I): boolean;
  ctes: string;
  /** the parameters $1.. of `ctes` for these items (always as many: the highest $n of ctes) */
  values(items: readonly I[]): unknown[];
  /** the columns `§answer` selects after `ord, held`, with their types (another kind's part of the statement answers them NULL) */
  answers: readonly (readonly [column: string, type: string])[];
  /**
   * A kind writing rows the other kinds write too (the thread's row: creates): a write of it shares
   * no statement with another write of its thread and is never moved ahead of one (the other kinds
   * write rows apart from each other's and commute).
   */
  exclusive?: boolean;
}

/**
 * An `accepts` for kinds whose items each write the rows `keysOf` names: false once one of them is
 * written by `items` already (`memo`: the keys of each items list seen, built once).
 */
export function acceptsFresh<I>(memo: WeakMap<readonly I[], Set<string>>, keysOf: (item: I) => string[]): MergeKind<I>["accepts"] {
  return (items, item) => {
    let known = memo.get(items);
    if (known === undefined) memo.set(items, (known = new Set(items.flatMap(keysOf))));
    const keys = keysOf(item);
    if (keys.some((k) => known.has(k))) return false;
    for (const k of keys) known.add(k);
    return true;
  };
}

/** `accepts` of a kind writing one row per thread (its run end, its create): one write per thread in a statement. */
export const oncePerThread = <I extends { threadId: string }>(): MergeKind<I>["accepts"] =>
  acceptsFresh(new WeakMap<readonly I[], Set<string>>(), (item) => [item.threadId]);

/** A write's part in a merged statement: its kind, and its item, built when it is sent. */
export interface Mergeable {
  kind: MergeKind<unknown>;
  item(): unknown;
}

export const mergeable = <I>(kind: MergeKind<I>, item: () => I): Mergeable => ({ kind: kind as MergeKind<unknown>, item });

interface Write {
  kind: "write";
  threadId: string;
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
/**
 * Transactions in flight before ready batches wait to leave together. 2, not 4, since the creates
 * merge too (session 28): a larger group is fewer, larger merged statements, and PostgreSQL's CPU
 * per run at wait-c64 fell ~20% (bench/RESULTS.md); a lone run still waits for nothing.
 */
export const GROUPS_IN_FLIGHT = 2;

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
   * the statement's answer row (none: undefined). `merge`: the write's part in a statement
   * merging several (its fence taken now, as here; its answer row must answer as this one's).
   */
  issueWrite<T = undefined>(
    threadId: string,
    statement: { plain: NamedStatement; fenced: NamedStatement },
    values: unknown[],
    answer?: (row: Record<string, unknown> | undefined) => T,
    merge?: Mergeable,
  ): Promise<T> {
    const fence = this.fenceOf(threadId);
    const query = fence === undefined ? { ...statement.plain, values } : { ...statement.fenced, values: [...values, ...fenceValues(fence)] };
    return this.issueStatement(threadId, {
      query: () => query,
      result: (r) => {
        if (fence !== undefined) this.checkHeld(fence, r.rows[0]?.held);
        return answer === undefined ? (undefined as T) : answer(r.rows[0]);
      },
      merge,
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
      chain.queue.push({
        kind: "write",
        threadId,
        statement: statement as ChainStatement<unknown> | undefined,
        alone,
        resolve: resolve as (v: unknown) => void,
        reject,
      });
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
    let statements: PlannedStatement[] = [];
    try {
      statements = planStatements(writes);
      client = await pool.connect();
      const c = client;
      if (statements.length === 1) {
        // one statement (the writes merged): its own transaction
        const [only] = await Promise.allSettled([c.query(statements[0].query)]);
        if (only.status === "fulfilled") results = [only.value];
      } else {
        const sent = pipelinedInOneWrite(c, () => [c.query("BEGIN"), ...statements.map((st) => c.query(st.query)), c.query("COMMIT")]);
        const settled = await Promise.allSettled(sent);
        const commit = settled[settled.length - 1];
        // a statement that failed aborted the transaction: COMMIT then answers ROLLBACK
        if (settled.every((s) => s.status === "fulfilled") && commit.status === "fulfilled" && commit.value.command === "COMMIT") {
          results = settled.slice(1, -1).map((s) => (s as PromiseFulfilledResult<pg.QueryResult>).value);
        }
      }
      client.release();
    } catch (err) {
      results = undefined;
      client?.release(err instanceof Error ? err : new Error(String(err)));
    }
    if (results === undefined) {
      if (!aloneAfter) return false;
      for (const w of writes) await runAlone(w);
      return true;
    }
    statements.forEach((st, i) => {
      const r = results[i];
      if (st.parts === undefined) return settleWith(st.writes[0], r);
      const answers = new Map<string, Record<string, unknown>>();
      for (const row of r.rows as Record<string, unknown>[]) answers.set(`${String(row.part)} ${String(row.ord)}`, row);
      st.parts.forEach((writes, part) =>
        writes.forEach((w, at) => {
          const row = answers.get(`${part} ${at + 1}`);
          settleWith(w, { ...r, rowCount: row === undefined ? 0 : 1, rows: row === undefined ? [] : [row] });
        }),
      );
    });
    return true;
  }
}

/** The socket under a pooled client (node-postgres keeps it on its connection). */
type Corkable = { connection?: { stream?: { cork?(): void; uncork?(): void } } };

/**
 * Queries issued by `issue` on a pipelining client leave in one socket write. node-postgres corks
 * and uncorks the socket around each query it sends, so a batch of BEGIN, n statements and COMMIT
 * was n + 2 writes, each a system call and, when PostgreSQL's backend had caught up, a wake-up of
 * it; inside our cork (corks nest) they are buffered and written together when it is lifted.
 */
export function pipelinedInOneWrite<T>(client: pg.PoolClient, issue: () => T): T {
  const stream = (client as unknown as Corkable).connection?.stream;
  stream?.cork?.();
  try {
    return issue();
  } finally {
    stream?.uncork?.();
  }
}

/**
 * One statement of a batch: a write's own (`parts` undefined), or writes merged: per kind in it,
 * its writes in item order (the answer rows carry `part`, the kind's place, and `ord`).
 */
interface PlannedStatement {
  query: pg.QueryConfig;
  writes: Write[];
  parts?: Write[][];
}

/**
 * The statements a batch's writes (in issue order) go as: each mergeable write joins the latest
 * statement of its kind unless its thread wrote something not mergeable since that statement's
 * place, or the kind refuses it (a row written twice); a kind's single write keeps its own
 * statement. A batch of mergeable writes only, one statement per kind, is one statement.
 */
function planStatements(writes: Write[]): PlannedStatement[] {
  interface Slot {
    kind?: MergeKind<unknown>;
    /** the writes' items, built once a second write is to join (a kind's single write keeps its own statement) */
    items?: unknown[];
    writes: Write[];
  }
  const slots: Slot[] = [];
  const latest = new Map<MergeKind<unknown>, number>();
  /** thread → place of its latest write no later write of it may join or move ahead of (not mergeable, or exclusive) */
  const barrier = new Map<string, number>();
  /** thread → place of its latest write */
  const last = new Map<string, number>();
  /** threads with an exclusive write in the batch */
  const exclusives = new Set<string>();
  /** false once a thread has an exclusive write and another one: they may not share one statement */
  let oneStatement = true;
  const placed = (w: Write, at: number, bars: boolean) => {
    last.set(w.threadId, Math.max(at, last.get(w.threadId) ?? -1));
    if (bars) barrier.set(w.threadId, at);
  };
  for (const w of writes) {
    const merge = w.statement!.merge;
    if (merge === undefined) {
      placed(w, slots.length, true);
      slots.push({ writes: [w] });
      continue;
    }
    const exclusive = merge.kind.exclusive === true;
    if (exclusive ? last.has(w.threadId) : exclusives.has(w.threadId)) oneStatement = false;
    if (exclusive) exclusives.add(w.threadId);
    // an exclusive write goes after every write of its thread so far; any other, after the last barrier
    const floor = (exclusive ? last : barrier).get(w.threadId) ?? -1;
    const at = latest.get(merge.kind);
    const slot = at === undefined ? undefined : slots[at];
    if (slot !== undefined && at! > floor) {
      const items = (slot.items ??= slot.writes.map((x) => x.statement!.merge!.item()));
      const item = merge.item();
      if (merge.kind.accepts(items, item)) {
        items.push(item);
        slot.writes.push(w);
        placed(w, at!, exclusive);
        continue;
      }
      latest.set(merge.kind, slots.length);
      placed(w, slots.length, exclusive);
      slots.push({ kind: merge.kind, items: [item], writes: [w] });
      continue;
    }
    latest.set(merge.kind, slots.length);
    placed(w, slots.length, exclusive);
    slots.push({ kind: merge.kind, writes: [w] });
  }
  const itemsOf = (s: Slot) => (s.items ??= s.writes.map((x) => x.statement!.merge!.item()));
  if (oneStatement && slots.length > 1 && slots.every((s) => s.kind !== undefined) && latest.size === slots.length) {
    // every write mergeable, one statement per kind: one statement, in a fixed order of the kinds
    const parts = slots.slice().sort((a, b) => (a.kind!.name < b.kind!.name ? -1 : 1));
    return [{ query: mergedQuery(parts.map((s) => ({ kind: s.kind!, items: itemsOf(s) }))), writes: writes, parts: parts.map((s) => s.writes) }];
  }
  return slots.map((s) =>
    s.kind === undefined || s.writes.length === 1
      ? { query: s.writes[0].statement!.query(), writes: s.writes }
      : { query: mergedQuery([{ kind: s.kind, items: s.items! }]), writes: s.writes, parts: [s.writes] },
  );
}

/** statements (prepared name and text) by their kinds' names in order: made once each */
const mergedStatements = new Map<string, { name: string; text: string }>();

/** One statement writing each kind's items: its CTEs with names and parameters apart, its answers with their part. */
function mergedQuery(parts: { kind: MergeKind<unknown>; items: unknown[] }[]): pg.QueryConfig {
  const values = parts.flatMap((p) => p.kind.values(p.items));
  const key = parts.length === 1 ? parts[0].kind.name : parts.map((p) => p.kind.name).join(",");
  let statement = mergedStatements.get(key);
  if (statement === undefined) {
    const name = parts.length === 1 ? parts[0].kind.name : batchName(parts.map((p) => p.kind.name));
    // every part answers every part's columns (UNION ALL): its own, NULL for the others'
    const columns = new Map(parts.flatMap((p) => p.kind.answers));
    let offset = 0;
    const ctes: string[] = [];
    const answers: string[] = [];
    parts.forEach((p, i) => {
      const prefix = parts.length === 1 ? "" : `p${i}_`;
      const shift = offset;
      ctes.push(p.kind.ctes.replaceAll("§", prefix).replace(/\$(\d+)/g, (_, n: string) => `$${Number(n) + shift}`));
      const own = new Set(p.kind.answers.map(([column]) => column));
      const selected = [...columns].map(([column, type]) => (own.has(column) ? column : `NULL::${type} AS ${column}`));
      answers.push(`SELECT ${[`${i} AS part`, "ord", "held", ...selected].join(", ")} FROM ${prefix}answer`);
      offset += highestParam(p.kind.ctes);
    });
    const text = `WITH ${ctes.join(", ")}\n${answers.join("\nUNION ALL\n")}`;
    if (offset !== values.length) throw new Error(`${name}: ${values.length} values for ${offset} parameters`);
    mergedStatements.set(key, (statement = { name, text }));
  }
  return { name: statement.name, text: statement.text, values };
}

/**
 * The prepared name of a statement of several kinds: troupe_batch(their names). PostgreSQL keeps
 * 63 bytes of a name, and two statements cut to one name would collide on a connection: a longer
 * one is named by a digest of it.
 */
function batchName(kinds: string[]): string {
  const name = `troupe_batch(${kinds.map((k) => k.replace(/^troupe_/, "")).join(",")})`;
  return name.length <= 63 ? name : `troupe_batch_${createHash("sha1").update(name).digest("hex").slice(0, 32)}`;
}

/** The highest `$n` a text names. */
function highestParam(text: string): number {
  let n = 0;
  for (const m of text.matchAll(/\$(\d+)/g)) n = Math.max(n, Number(m[1]));
  return n;
}

function settleWith(w: Write, r: pg.QueryResult): void {
  try {
    w.resolve(w.statement!.result(r));
  } catch (err) {
    w.reject(err);
  }
}

async function runAlone(w: Write): Promise<void> {
  try {
    w.resolve(await w.alone());
  } catch (err) {
    w.reject(err);
  }
}
