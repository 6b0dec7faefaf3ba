// Jobs that must run on one node at a time (the thread TTL sweep, the webhook outbox drain, chores):
// each node runs a SingletonJob; whichever holds the job's session advisory lock runs it. The lock
// lives on a connection of its own, so it goes when that session goes: a killed node's lock is
// released by the server as soon as its socket closes, and the job moves to another node.
/*
 * - Contenders try pg_try_advisory_lock every retryMs (never block: a blocked session could not
 *   tell a dead holder from a live one any sooner).
 * - The holder checks its session every checkMs (a query with a client-side timeout); a failed
 *   check or a connection error aborts the job's signal at once, then the session is closed, so
 *   the job stops here before the server lets another node take it (a partitioned holder's
 *   session is dropped by the server's TCP keepalives, set short on this connection).
 * - A job that returns (or throws) gives the lock up; it is taken again after retryMs.
 */
import type pg from "pg";
import type { PostgresDb } from "../storage/postgres/pool.ts";
import { systemClock, type Clock } from "../util/clock.ts";
import { dedicatedClient } from "./connection.ts";

/** First key of the job locks: "troupe singleton" (the second is hashtext(schema:name)). */
const LOCK_CLASS = 0x7472_736a; // "trsj"

export interface SingletonOptions {
  /** the job's name: one lock per name and schema */
  name: string;
  /** runs while this node holds the lock; must stop (and settle) once `signal` aborts */
  run(signal: AbortSignal): Promise<void>;
  retryMs?: number;
  checkMs?: number;
  clock?: Clock;
  onError?(err: unknown): void;
  /** told when this node starts or stops holding the job */
  onHolding?(holding: boolean): void;
}

export class SingletonJob {
  private readonly retryMs: number;
  private readonly checkMs: number;
  private readonly clock: Clock;
  private client: pg.Client | undefined;
  private cancelTimer: (() => void) | undefined;
  private stopped = true;
  private holding: { abort: AbortController; done: Promise<void> } | undefined;
  private loop: Promise<void> = Promise.resolve();
  /** a job aborted by a lost session, until it has settled (it must not run twice here) */
  private settling: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: PostgresDb,
    private readonly opts: SingletonOptions,
  ) {
    this.retryMs = opts.retryMs ?? 2_000;
    this.checkMs = opts.checkMs ?? 2_000;
    this.clock = opts.clock ?? systemClock;
  }

  get isHolding(): boolean {
    return this.holding !== undefined;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.step();
  }

  /** Stops contending; a held job is aborted and awaited, and the lock released. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    await this.loop;
    await this.giveUp();
  }

  /** Runs `work` after the previous step, then schedules the next one (unless stopped). */
  private step(): void {
    this.loop = this.loop.then(async () => {
      if (this.stopped) return;
      try {
        if (this.holding === undefined) await this.tryTake();
        else await this.check();
      } catch (err) {
        this.opts.onError?.(err);
        await this.giveUp();
      }
      if (!this.stopped) {
        this.cancelTimer = this.clock.at(this.clock.now() + (this.holding ? this.checkMs : this.retryMs), () => this.step());
      }
    });
  }

  private async tryTake(): Promise<void> {
    await this.settling;
    const client = await this.connection();
    const result = await client.query<{ taken: boolean }>("SELECT pg_try_advisory_lock($1, hashtext($2)) AS taken", [
      LOCK_CLASS,
      `${this.db.schema}:${this.opts.name}`,
    ]);
    if (!result.rows[0].taken) return;
    if (this.stopped) {
      // stop() came while the lock was being taken: a stopping node does not start the job
      await client.query("SELECT pg_advisory_unlock($1, hashtext($2))", [LOCK_CLASS, `${this.db.schema}:${this.opts.name}`]);
      return;
    }
    const abort = new AbortController();
    const done = (async () => {
      try {
        await this.opts.run(abort.signal);
      } catch (err) {
        this.opts.onError?.(err);
      }
    })().then(async () => {
      // the job ended by itself: give the lock up (unless stopping already does)
      if (this.holding?.abort === abort && !abort.signal.aborted) {
        this.holding = undefined;
        this.opts.onHolding?.(false);
        await client.query("SELECT pg_advisory_unlock($1, hashtext($2))", [LOCK_CLASS, `${this.db.schema}:${this.opts.name}`]).catch(() => undefined);
      }
    });
    this.holding = { abort, done };
    this.opts.onHolding?.(true);
  }

  private async check(): Promise<void> {
    const client = this.client;
    if (client === undefined) throw new Error("singleton: lost its connection");
    await client.query("SELECT 1");
  }

  /** Aborts the job (if held), waits for it, and closes the session (which releases the lock). */
  private async giveUp(): Promise<void> {
    const held = this.holding;
    this.holding = undefined;
    if (held !== undefined) {
      held.abort.abort();
      this.opts.onHolding?.(false);
      await held.done;
    }
    const client = this.client;
    this.client = undefined;
    if (client !== undefined) await client.end().catch(() => undefined);
  }

  private async connection(): Promise<pg.Client> {
    if (this.client !== undefined) return this.client;
    const client = dedicatedClient(this.db, { name: `troupe-singleton-${this.opts.name}`, queryTimeoutMs: Math.max(1_000, this.checkMs) });
    // a dropped session releases the lock on the server: stop the job here at once
    const lost = (err?: unknown) => {
      if (this.client !== client) return;
      if (err !== undefined) this.opts.onError?.(err);
      const held = this.holding;
      if (held !== undefined) {
        this.holding = undefined;
        held.abort.abort();
        this.opts.onHolding?.(false);
        this.settling = held.done;
      }
      this.client = undefined;
      client.end().catch(() => undefined);
    };
    client.on("error", lost);
    client.on("end", () => lost());
    try {
      await client.connect();
    } catch (err) {
      await client.end().catch(() => undefined);
      throw err;
    }
    this.client = client;
    // the server drops a vanished holder's session (and its lock) within ~15 s, not TCP's hours
    await client.query("SET tcp_keepalives_idle = 5; SET tcp_keepalives_interval = 5; SET tcp_keepalives_count = 2");
    return client;
  }
}
