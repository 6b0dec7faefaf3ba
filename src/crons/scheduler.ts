// Fires crons on the HTTP thread. One timer (on a Clock) wakes at the earliest due tick; each
// due cron creates its run through a CronRunner (in the server: exactly as the runs API does)
// and persists its next_run_date. Ticks missed while the server was down, or while a tick was
// late, are not replayed: the next one is computed from the moment the tick fires.
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

interface ScheduledCron {
  cronId: string;
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

  constructor(
    readonly store: CronsPort,
    private readonly runner: CronRunner,
    private readonly clock: Clock = systemClock,
  ) {}

  /** Schedule every live cron found in storage and refresh its next_run_date (it may be stale). */
  async start(): Promise<void> {
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
    this.unschedule(rec.cron_id);
    const now = this.clock.now();
    if (this.stopped || !isLive(rec, now)) return undefined;
    const pattern = new Cron(rec.schedule, { ...cronerOptions(rec), paused: true });
    const due = pattern.nextRun(new Date(now));
    if (!due) {
      pattern.stop();
      return undefined;
    }
    const entry: ScheduledCron = { cronId: rec.cron_id, pattern, dueAt: due.getTime() };
    this.scheduled.set(rec.cron_id, entry);
    this.arm();
    return entry;
  }

  unschedule(cronId: string): void {
    const entry = this.scheduled.get(cronId);
    if (!entry) return;
    entry.pattern.stop();
    this.scheduled.delete(cronId);
    this.arm();
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
    const next = entry.pattern.nextRun(new Date(now));
    if (next) entry.dueAt = next.getTime();
    else this.unschedule(entry.cronId);
    const p: Promise<void> = this.tick(entry, next ? next.toISOString() : null)
      .catch((err: unknown) => log.warn(`cron ${entry.cronId}: ${(err as Error)?.message ?? String(err)}`, { cron_id: entry.cronId }))
      .finally(() => this.inflight.delete(p));
    this.inflight.add(p);
  }

  private async tick(entry: ScheduledCron, next: string | null): Promise<void> {
    // only the schedule still in charge may act or write: a PATCH may have replaced it meanwhile
    const current = () => this.scheduled.get(entry.cronId) === entry || (next === null && !this.scheduled.has(entry.cronId));
    const rec = await this.store.get(entry.cronId);
    if (!rec || !isLive(rec, this.clock.now())) {
      if (this.scheduled.get(entry.cronId) === entry) this.unschedule(entry.cronId);
      return;
    }
    const { gone } = await this.runner.createRun(rec);
    if (gone !== undefined) {
      log.warn(`cron ${rec.cron_id}: ${gone} no longer exists, deleting the cron`, { cron_id: rec.cron_id });
      if (this.scheduled.get(entry.cronId) === entry) this.unschedule(entry.cronId);
      await this.store.remove(rec.cron_id);
      return;
    }
    await this.store.update(entry.cronId, (cur) => (current() && cur.updated_at === rec.updated_at ? { ...cur, next_run_date: next } : undefined));
  }
}
