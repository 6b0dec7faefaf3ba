// The crons family on LMDB. Only the HTTP thread writes crons (API handlers and the scheduler);
// every read-modify-write runs inside one write transaction so a tick persisting next_run_date
// never undoes a concurrent PATCH or DELETE. putCron/removeCron keep the crons' index in it.
import type { Storage } from "../env.ts";
import type { CronRecord } from "../records.ts";
import { countCrons, putCron, removeCron, searchCrons } from "../indexes/crons.ts";
import type { CronFilter, CronSort, CronsPort, Page, PageSpec } from "../port.ts";

export class LmdbCrons implements CronsPort {
  constructor(private readonly s: Storage) {}

  get(cronId: string): Promise<CronRecord | undefined> {
    return Promise.resolve(this.s.crons.get(cronId));
  }

  all(): Promise<CronRecord[]> {
    return Promise.resolve(Array.from(this.s.crons.getRange({}), (e) => e.value));
  }

  search(q: CronFilter & PageSpec<CronSort>): Promise<Page<CronRecord>> {
    return searchCrons(this.s, q);
  }

  count(f: CronFilter): Promise<number> {
    return countCrons(this.s, f);
  }

  async put(rec: CronRecord): Promise<void> {
    await this.s.root.transaction(() => putCron(this.s, rec, this.s.crons.get(rec.cron_id)));
  }

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

  remove(cronId: string): Promise<boolean> {
    return this.s.root.transaction(() => {
      const cur = this.s.crons.get(cronId);
      if (cur === undefined) return false;
      removeCron(this.s, cur);
      return true;
    });
  }
}
