// Fires crons on the HTTP thread. One timer (on a Clock) wakes at the earliest due tick; each
// due cron creates its run through a CronRunner (in the server: exactly as the runs API does)
// and persists its next_run_date. Ticks missed while the server was down, or while a tick was
// late, are not replayed: the next one is computed from the moment the tick fires.
// In a cluster every node schedules every cron and fires a tick only if it claimed it
// (CronTickClaims: src/cluster/cron-claims.ts); crons created, changed or deleted through other
// nodes are picked up by re-reading them all every `resyncMs`.
import { Cron } from "croner";
import type { CronRecord } from "../storage/records.ts";
import { systemClock, type Clock } from "../util/clock.ts";
import { cronerOptions, isLive } from "./schedule.ts";
import type { CronsPort } from "../storage/port.ts";
import { componentLog } from "../log/logger.ts";

const log = componentLog("crons");

/** What a tick does. */
export interface CronRunner {
  /** Create the cron's run for one tick; `gone` names what no longer exists (the cron is then deleted). */
  createRun(rec: CronRecord): Promise<{ gone?: string }>;
}

/** Cluster mode: which node fires a tick, and how this node learns of other nodes' cron changes. */
export interface CronTickClaims {
  /** true when this node claimed the cron's tick at `tickAt` (it alone fires it) */
  claim(cronId: string, tickAt: Date): Promise<boolean>;
  /** the cron was deleted: its claims go */
  forget(cronId: string): Promise<void>;
  /** how often every cron is re-read (changes made through other nodes) */
  resyncMs: number;
}

interface ScheduledCron {
  cronId: string;
  /** the record's updated_at when scheduled: a resync reschedules a cron changed since */
  updatedAt: string;
  /** the schedule, paused: it only computes next runs */
  pattern: Cron;
  dueAt: number;
}

export class CronScheduler {
  private readonly scheduled = new Map<string, ScheduledCron>();
  private readonly inflight = new Set<Promise<void>>();
  private cancelWake: (() => void) | undefined;
  private wakeAt = Number.POSITIVE_INFINITY;
  private stopped = false;
  private cancelResync: (() => void) | undefined;
  private resyncing: Promise<void> = Promise.resolve();
  /** crons (re)scheduled or unscheduled while a resync reads: it leaves them to the next one */
  private touchedDuringResync: Set<string> | undefined;

  constructor(
    readonly store: CronsPort,
    private readonly runner: CronRunner,
    private readonly clock: Clock = systemClock,
    private readonly claims?: CronTickClaims,
  ) {}

  /** Schedule every live cron found in storage and refresh its next_run_date (it may be stale). */
  async start(): Promise<void> {
    await this.load();
    if (this.claims) this.scheduleResync(this.claims.resyncMs);
  }

  private async load(): Promise<void> {
    const writes: Promise<unknown>[] = [];
    for (const rec of await this.store.all()) {
      const entry = this.schedule(rec);
      const next = entry ? new Date(entry.dueAt).toISOString() : null;
      if (next !== rec.next_run_date) {
        writes.push(this.store.update(rec.cron_id, (cur) => (cur.updated_at === rec.updated_at ? { ...cur, next_run_date: next } : undefined)));
      }
    }
    await Promise.all(writes);
  }

  /** (Re)schedule a cron after it was created or changed; a dead cron just loses its schedule. */
  schedule(rec: CronRecord): ScheduledCron | undefined {
    this.unschedule(rec.cron_id); // (marks it touched)
    const now = this.clock.now();
    if (this.stopped || !isLive(rec, now)) return undefined;
    const pattern = new Cron(rec.schedule, { ...cronerOptions(rec), paused: true });
    const due = pattern.nextRun(new Date(now));
    if (!due) {
      pattern.stop();
      return undefined;
    }
    const entry: ScheduledCron = { cronId: rec.cron_id, updatedAt: rec.updated_at, pattern, dueAt: due.getTime() };
    this.scheduled.set(rec.cron_id, entry);
    this.arm();
    return entry;
  }

  unschedule(cronId: string): void {
    this.touchedDuringResync?.add(cronId);
    const entry = this.scheduled.get(cronId);
    if (!entry) return;
    entry.pattern.stop();
    this.scheduled.delete(cronId);
    this.arm();
  }

  /** The cron was deleted: unscheduled here, its tick claims dropped (other nodes unschedule it at their next resync). */
  async deleted(cronId: string): Promise<void> {
    this.unschedule(cronId);
    await this.claims?.forget(cronId);
  }

  /** Whether the cron is scheduled to fire. */
  isScheduled(cronId: string): boolean {
    return this.scheduled.has(cronId);
  }

  /** Resolves once the ticks in flight have created their runs and stored their next_run_date. */
  async settled(): Promise<void> {
    while (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
  }

  /** Stop scheduling and wait for ticks already creating runs (call before the pool closes). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.cancelResync?.();
    await this.resyncing;
    for (const id of [...this.scheduled.keys()]) this.unschedule(id);
    await this.settled();
  }

  /** Keeps one timer, at the earliest due tick. */
  private arm(): void {
    let earliest = Number.POSITIVE_INFINITY;
    for (const e of this.scheduled.values()) if (e.dueAt < earliest) earliest = e.dueAt;
    if (earliest === this.wakeAt) return;
    this.cancelWake?.();
    this.cancelWake = undefined;
    this.wakeAt = earliest;
    if (earliest !== Number.POSITIVE_INFINITY) this.cancelWake = this.clock.at(earliest, () => this.wake());
  }

  private wake(): void {
    this.cancelWake = undefined;
    this.wakeAt = Number.POSITIVE_INFINITY;
    const now = this.clock.now();
    for (const entry of [...this.scheduled.values()]) if (entry.dueAt <= now) this.fire(entry, now);
    this.arm();
  }

  private fire(entry: ScheduledCron, now: number): void {
    const tickAt = entry.dueAt;
    const next = entry.pattern.nextRun(new Date(now));
    if (next) entry.dueAt = next.getTime();
    else this.unschedule(entry.cronId);
    const p: Promise<void> = this.tick(entry, tickAt, next ? next.toISOString() : null)
      .catch((err: unknown) => log.warn(`cron ${entry.cronId}: ${(err as Error)?.message ?? String(err)}`, { cron_id: entry.cronId }))
      .finally(() => this.inflight.delete(p));
    this.inflight.add(p);
  }

  private async tick(entry: ScheduledCron, tickAt: number, next: string | null): Promise<void> {
    // only the schedule still in charge may act or write: a PATCH may have replaced it meanwhile
    const current = () => this.scheduled.get(entry.cronId) === entry || (next === null && !this.scheduled.has(entry.cronId));
    const rec = await this.store.get(entry.cronId);
    if (!rec || !isLive(rec, this.clock.now())) {
      if (this.scheduled.get(entry.cronId) === entry) this.unschedule(entry.cronId);
      return;
    }
    if (this.claims) {
      // cluster: changed through another node since scheduled here (a tick of the old schedule): take the new one
      if (rec.updated_at !== entry.updatedAt) {
        if (this.scheduled.get(entry.cronId) === entry) this.schedule(rec);
        return;
      }
      // another node fired this tick (or a later one) already
      if (!(await this.claims.claim(rec.cron_id, new Date(tickAt)))) return;
    }
    const { gone } = await this.runner.createRun(rec);
    if (gone !== undefined) {
      log.warn(`cron ${rec.cron_id}: ${gone} no longer exists, deleting the cron`, { cron_id: rec.cron_id });
      if (this.scheduled.get(entry.cronId) === entry) this.unschedule(entry.cronId);
      await this.store.remove(rec.cron_id);
      await this.claims?.forget(rec.cron_id);
      return;
    }
    await this.store.update(entry.cronId, (cur) => (current() && cur.updated_at === rec.updated_at ? { ...cur, next_run_date: next } : undefined));
  }

  private scheduleResync(everyMs: number): void {
    if (this.stopped) return;
    this.cancelResync = this.clock.at(this.clock.now() + everyMs, () => {
      this.cancelResync = undefined;
      this.resyncing = this.resync()
        .catch((err: unknown) => log.warn(`cron resync failed: ${(err as Error)?.message ?? String(err)}`))
        .finally(() => this.scheduleResync(everyMs));
    });
  }

  /** Cluster: schedules crons created or changed through other nodes, drops those deleted there. */
  async resync(): Promise<void> {
    const touched = new Set<string>();
    this.touchedDuringResync = touched;
    try {
      const records = await this.store.all();
      if (this.stopped) return;
      const now = this.clock.now();
      const seen = new Set<string>();
      for (const rec of records) {
        seen.add(rec.cron_id);
        if (touched.has(rec.cron_id)) continue; // changed here meanwhile: this read may be older
        const entry = this.scheduled.get(rec.cron_id);
        if (entry === undefined ? isLive(rec, now) : entry.updatedAt !== rec.updated_at) this.schedule(rec);
      }
      for (const id of [...this.scheduled.keys()]) if (!seen.has(id) && !touched.has(id)) this.unschedule(id);
    } finally {
      this.touchedDuringResync = undefined;
    }
  }
}
