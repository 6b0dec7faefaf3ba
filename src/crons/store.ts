// Cron records in the `crons` LMDB database. Only the HTTP thread writes them (API handlers and
// the scheduler); every read-modify-write runs inside one write transaction so a tick persisting
// next_run_date can never undo a concurrent PATCH or DELETE. Writes go through putCron/removeCron
// (storage/indexes/crons.ts), which keep the crons' index in the same transaction.
import type { Storage } from "../storage/env.ts";
import type { CronRecord } from "../storage/records.ts";
import { countCrons, putCron, removeCron, searchCrons, type CronFilter, type CronSearch } from "../storage/indexes/crons.ts";
import type { Page } from "../storage/port.ts";

/** The conditions of a cron search or count. */
export type CronQuery = CronFilter;

export class CronStore {
  constructor(private readonly s: Storage) {}

  get(cronId: string): CronRecord | undefined {
    return this.s.crons.get(cronId);
  }

  all(): CronRecord[] {
    return [...this.s.crons.getRange({})].map((e) => e.value);
  }

  /** A page of matching crons and how many match (storage/indexes/crons.ts). */
  search(q: CronSearch): Promise<Page<CronRecord>> {
    return searchCrons(this.s, q);
  }

  count(f: CronFilter): Promise<number> {
    return countCrons(this.s, f);
  }

  async put(rec: CronRecord): Promise<void> {
    await this.s.root.transaction(() => putCron(this.s, rec, this.s.crons.get(rec.cron_id)));
  }

  /**
   * Atomically replace a cron with `change(current)`; `undefined` from `change` keeps it as is.
   * Resolves to the stored record, or undefined when the cron does not exist.
   */
  update(cronId: string, change: (cur: CronRecord) => CronRecord | undefined): Promise<CronRecord | undefined> {
    return this.s.root.transaction(() => {
      const cur = this.s.crons.get(cronId);
      if (!cur) return undefined;
      const next = change(cur);
      if (!next) return cur;
      putCron(this.s, next, cur);
      return next;
    });
  }

  /** Resolves to false when the cron did not exist. */
  remove(cronId: string): Promise<boolean> {
    return this.s.root.transaction(() => {
      const cur = this.s.crons.get(cronId);
      if (cur === undefined) return false;
      removeCron(this.s, cur);
      return true;
    });
  }
}
