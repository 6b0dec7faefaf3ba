// Fires crons on the HTTP thread: one croner job per live cron (enabled, not past end_time).
// Each tick creates a run exactly as the runs API does (buildCreateRun → pool.request) and
// persists the cron's next_run_date. Ticks missed while the server was down are not replayed.
import { Cron } from "croner";
import { TroupeError } from "../errors.ts";
import { buildCreateRun } from "../api/run-request.ts";
import type { AppContext } from "../server/context.ts";
import type { CronRecord } from "../storage/records.ts";
import { uuid7 } from "../util/ids.ts";
import { runBodyOf } from "./payload.ts";
import { cronerOptions, isLive, nextRunDate } from "./schedule.ts";
import { CronStore } from "./store.ts";

export class CronScheduler {
  readonly store: CronStore;
  private readonly jobs = new Map<string, Cron>();
  private readonly inflight = new Set<Promise<void>>();
  private stopped = false;

  constructor(private readonly app: AppContext) {
    this.store = new CronStore(app.storage);
  }

  /** Schedule every live cron found in storage and refresh its next_run_date (it may be stale). */
  async start(): Promise<void> {
    const writes: Promise<unknown>[] = [];
    for (const rec of this.store.all()) {
      this.schedule(rec);
      const next = nextRunDate(rec);
      if (next !== rec.next_run_date) {
        writes.push(this.store.update(rec.cron_id, (cur) => (cur.updated_at === rec.updated_at ? { ...cur, next_run_date: next } : undefined)));
      }
    }
    await Promise.all(writes);
  }

  /** (Re)create the job of a cron after it was created or changed; a dead cron just loses its job. */
  schedule(rec: CronRecord): void {
    this.unschedule(rec.cron_id);
    if (this.stopped || !isLive(rec)) return;
    const job: Cron = new Cron(rec.schedule, { ...cronerOptions(rec), unref: true }, () => this.fire(rec.cron_id, job));
    this.jobs.set(rec.cron_id, job);
  }

  unschedule(cronId: string): void {
    this.jobs.get(cronId)?.stop();
    this.jobs.delete(cronId);
  }

  /** Whether a job is currently scheduled for the cron. */
  isScheduled(cronId: string): boolean {
    return this.jobs.has(cronId);
  }

  /** Stop every job and wait for ticks already creating runs (call before the pool closes). */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const id of [...this.jobs.keys()]) this.unschedule(id);
    await Promise.allSettled([...this.inflight]);
  }

  private fire(cronId: string, job: Cron): void {
    const p: Promise<void> = this.tick(cronId, job)
      .catch((err: unknown) => console.warn(`[troupe] cron ${cronId}: ${(err as Error)?.message ?? String(err)}`))
      .finally(() => this.inflight.delete(p));
    this.inflight.add(p);
  }

  private async tick(cronId: string, job: Cron): Promise<void> {
    const current = () => this.jobs.get(cronId) === job;
    const next = job.nextRun()?.toISOString() ?? null;
    const rec = this.store.get(cronId);
    if (!current()) return;
    if (!rec || !isLive(rec)) {
      this.unschedule(cronId);
      return;
    }
    try {
      if (!(await this.createRun(rec))) return;
    } finally {
      // only the job still in charge may write: a PATCH may have replaced it meanwhile
      await this.store.update(cronId, (cur) => (current() ? { ...cur, next_run_date: next } : undefined));
      if (next === null && current()) this.unschedule(cronId);
    }
  }

  /** Create one run for a tick. False when the cron's thread or assistant is gone (cron deleted). */
  private async createRun(rec: CronRecord): Promise<boolean> {
    const { app } = this;
    const gone = rec.thread_id !== null && !app.storage.threads.get(rec.thread_id)
      ? `thread ${rec.thread_id}`
      : !app.storage.assistants.get(rec.assistant_id) ? `assistant ${rec.assistant_id}` : null;
    if (gone) {
      console.warn(`[troupe] cron ${rec.cron_id}: ${gone} no longer exists, deleting the cron`);
      this.unschedule(rec.cron_id);
      await this.store.remove(rec.cron_id);
      return false;
    }
    const stateless = rec.thread_id === null;
    const cmd = buildCreateRun(app, runBodyOf(rec), {}, { threadId: rec.thread_id ?? uuid7(), runId: uuid7(), stateless, observed: false });
    try {
      await app.pool.createRun(cmd);
    } catch (err) {
      // a thread cron with multitask_strategy "reject" skips ticks while the thread is busy
      if (!(err instanceof TroupeError && err.code === "MULTITASK_REJECTED")) throw err;
    }
    return true;
  }
}
