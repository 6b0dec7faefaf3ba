// Cron records in the `crons` LMDB database. Only the HTTP thread writes them (API handlers and
// the scheduler); every read-modify-write runs inside one write transaction so a tick persisting
// next_run_date can never undo a concurrent PATCH or DELETE.
import { matchesFilter } from "../domain/lifecycle.ts";
import type { Storage } from "../storage/env.ts";
import type { CronRecord, JsonObject } from "../storage/records.ts";

export interface CronQuery {
  assistant_id?: string | null;
  thread_id?: string | null;
  enabled?: boolean | null;
  metadata?: JsonObject | null;
}

export class CronStore {
  constructor(private readonly s: Storage) {}

  get(cronId: string): CronRecord | undefined {
    return this.s.crons.get(cronId);
  }

  all(): CronRecord[] {
    return [...this.s.crons.getRange({})].map((e) => e.value);
  }

  search(q: CronQuery): CronRecord[] {
    return this.all().filter((c) =>
      (q.assistant_id == null || c.assistant_id === q.assistant_id) &&
      (q.thread_id == null || c.thread_id === q.thread_id) &&
      (q.enabled == null || c.enabled === q.enabled) &&
      (q.metadata == null || matchesFilter(q.metadata, c.metadata)));
  }

  async put(rec: CronRecord): Promise<void> {
    await this.s.crons.put(rec.cron_id, rec);
  }

  /**
   * Atomically replace a cron with `change(current)`; `undefined` from `change` keeps it as is.
   * Resolves to the stored record, or undefined when the cron does not exist.
   */
  update(cronId: string, change: (cur: CronRecord) => CronRecord | undefined): Promise<CronRecord | undefined> {
    return this.s.crons.transaction(() => {
      const cur = this.s.crons.get(cronId);
      if (!cur) return undefined;
      const next = change(cur);
      if (!next) return cur;
      this.s.crons.put(cronId, next);
      return next;
    });
  }

  /** Resolves to false when the cron did not exist. */
  remove(cronId: string): Promise<boolean> {
    return this.s.crons.transaction(() => {
      if (this.s.crons.get(cronId) === undefined) return false;
      this.s.crons.remove(cronId);
      return true;
    });
  }
}
