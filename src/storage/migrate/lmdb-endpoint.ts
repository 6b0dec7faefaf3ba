// A data directory (LMDB) as a source or target of `troupe migrate`. Reads walk each DB in key
// order; writes go through the same put functions as the server's (secondary indexes written in
// the same transaction), so a migrated data dir needs no index build at start. The progress
// record is a file in the data dir.
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { LmdbCheckpointSaver } from "../checkpoints/lmdb-saver.ts";
import { openStorage, type Storage } from "../env.ts";
import { putAssistant } from "../indexes/assistants.ts";
import { ensureIndexes } from "../indexes/build.ts";
import { putCron } from "../indexes/crons.ts";
import { putStoreItem, storeKeyOf, type StoreKey } from "../indexes/store-items.ts";
import { putThread } from "../indexes/threads.ts";
import type { CronRecord, RunRecord } from "../records.ts";
import type { AssistantCopy, Copied, Cursor, Family, MigrationEndpoint, MigrationProgress, StoreItemCopy, ThreadCopy } from "./endpoint.ts";

const PROGRESS_FILE = "migrate-progress.json";
/** after every string in key order (the end of a [id, ...] range) */
const LAST = "\uffff";

type Range = { start: unknown } | Record<string, never>;
/** a range after `after` (exclusive: the first key equal to it is skipped by the caller) */
const from = (after: Cursor | undefined): Range => (after === undefined ? {} : { start: after });
const same = (a: unknown, b: Cursor | undefined): boolean => b !== undefined && JSON.stringify(a) === JSON.stringify(b);
const isActive = (r: RunRecord): boolean => r.status === "pending" || r.status === "running";

export function openLmdbEndpoint(dataDir: string, log: (line: string) => void): MigrationEndpoint {
  const s = openStorage(dataDir);
  ensureIndexes(s, log);
  return new LmdbEndpoint(s, resolve(dataDir));
}

class LmdbEndpoint implements MigrationEndpoint {
  readonly label: string;
  readonly saver: LmdbCheckpointSaver;

  constructor(
    private readonly s: Storage,
    private readonly dir: string,
  ) {
    this.label = `lmdb:${dir}`;
    this.saver = new LmdbCheckpointSaver(s);
  }

  async count(family: Family): Promise<number> {
    const s = this.s;
    return { assistants: s.assistants, crons: s.crons, store: s.store, threads: s.threads }[family].getKeysCount();
  }

  async *assistants(after?: Cursor): AsyncIterable<Copied<AssistantCopy>> {
    for (const { key, value } of this.s.assistants.getRange(from(after) as object)) {
      if (same(key, after)) continue;
      const versions = Array.from(this.s.assistantVersions.getRange({ start: [key, 0], end: [key, LAST] }), (e) => e.value);
      yield { item: { record: value, versions }, cursor: key };
    }
  }

  async *crons(after?: Cursor): AsyncIterable<Copied<CronRecord>> {
    for (const { key, value } of this.s.crons.getRange(from(after) as object)) {
      if (!same(key, after)) yield { item: value, cursor: key };
    }
  }

  async *storeItems(after?: Cursor): AsyncIterable<Copied<StoreItemCopy>> {
    for (const { key, value } of this.s.store.getRange(from(after) as object)) {
      if (same(key, after)) continue;
      const ttl = this.s.storeTtl.get(key);
      const vectors = this.s.storeVectors.get(key);
      yield { item: { record: value, ...(ttl ? { ttl } : {}), ...(vectors ? { vectors } : {}) }, cursor: key };
    }
  }

  async *threads(after?: Cursor): AsyncIterable<Copied<ThreadCopy>> {
    const s = this.s;
    for (const { key: id, value } of s.threads.getRange(from(after) as object)) {
      if (same(id, after)) continue;
      const range = { start: [id], end: [id, LAST] };
      const valuesJson = s.threadValues.get(id);
      const ttl = s.threadTtl.get(id);
      yield {
        item: {
          record: value,
          ...(valuesJson !== undefined ? { valuesJson } : {}),
          ...(ttl !== undefined ? { ttl } : {}),
          runs: Array.from(s.runs.getRange(range), (e) => e.value),
          // (values as a plain Uint8Array, whichever view msgpack decoded them into)
          deliveries: Array.from(
            s.webhookOutbox.getRange(range),
            (e) => [e.key[1], e.value.values === undefined ? e.value : { ...e.value, values: new Uint8Array(e.value.values) }] as [string, typeof e.value],
          ),
          outcomes: Array.from(s.webhookOutcomes.getRange(range), (e) => [e.key[1], e.value] as [string, typeof e.value]),
        },
        cursor: id,
      };
    }
  }

  async putAssistant(a: AssistantCopy): Promise<void> {
    const s = this.s;
    const id = a.record.assistant_id;
    await s.root.transaction(() => {
      putAssistant(s, a.record, s.assistants.get(id));
      for (const { key } of s.assistantVersions.getRange({ start: [id, 0], end: [id, LAST] })) s.assistantVersions.remove(key);
      for (const v of a.versions) s.assistantVersions.put([id, v.version], v);
    });
  }

  async putCron(c: CronRecord): Promise<void> {
    const s = this.s;
    await s.root.transaction(() => putCron(s, c, s.crons.get(c.cron_id)));
  }

  async putStoreItems(items: readonly StoreItemCopy[]): Promise<void> {
    const s = this.s;
    await s.root.transaction(() => {
      for (const { record, ttl, vectors } of items) {
        const k: StoreKey = storeKeyOf(record.namespace, record.key);
        putStoreItem(s, record, s.store.get(k));
        if (ttl) s.storeTtl.put(k, ttl);
        else s.storeTtl.remove(k);
        if (vectors) s.storeVectors.put(k, vectors);
        else s.storeVectors.remove(k);
      }
    });
  }

  async putThreads(threads: readonly ThreadCopy[]): Promise<void> {
    const s = this.s;
    await s.root.transaction(() => {
      for (const t of threads) {
        const id = t.record.thread_id;
        const range = { start: [id], end: [id, LAST] };
        putThread(s, t.record, s.threads.get(id));
        if (t.valuesJson !== undefined) s.threadValues.put(id, t.valuesJson);
        else s.threadValues.remove(id);
        if (t.ttl !== undefined) s.threadTtl.put(id, t.ttl);
        else s.threadTtl.remove(id);
        for (const { key } of s.runs.getRange(range)) {
          s.runs.remove(key);
          s.runThread.remove(key[1]);
          s.activeRuns.remove(key);
        }
        for (const r of t.runs) {
          s.runs.put([id, r.run_id], r);
          s.runThread.put(r.run_id, id);
          if (isActive(r)) s.activeRuns.put([id, r.run_id], 1);
        }
        for (const { key } of s.webhookOutbox.getRange(range)) s.webhookOutbox.remove(key);
        for (const { key } of s.webhookOutcomes.getRange(range)) s.webhookOutcomes.remove(key);
        for (const [runId, d] of t.deliveries) s.webhookOutbox.put([id, runId], d);
        for (const [runId, o] of t.outcomes) s.webhookOutcomes.put([id, runId], o);
      }
    });
  }

  /** all of them: removing a thread's checkpoints on LMDB is a local range delete either way */
  async threadsWithCheckpoints(threadIds: readonly string[]): Promise<Set<string>> {
    return new Set(threadIds);
  }

  async readProgress(source: string): Promise<MigrationProgress | undefined> {
    return this.progressFile()[source];
  }

  async writeProgress(p: MigrationProgress): Promise<void> {
    const all = this.progressFile();
    all[p.source] = p;
    const path = join(this.dir, PROGRESS_FILE);
    writeFileSync(`${path}.tmp`, JSON.stringify(all, null, 1));
    renameSync(`${path}.tmp`, path);
  }

  private progressFile(): Record<string, MigrationProgress> {
    const path = join(this.dir, PROGRESS_FILE);
    return existsSync(path) ? (JSON.parse(readFileSync(path, "utf8")) as Record<string, MigrationProgress>) : {};
  }

  async close(): Promise<void> {
    await this.saver.flush();
    await this.s.close();
  }
}
