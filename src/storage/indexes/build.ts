// Building secondary indexes for records written before they existed (a data dir from an older
// Troupe) or under another index layout. Runs at server start, before anything else reads or
// writes (no actor, no listener yet), on the HTTP thread.
//
// Each resource's state is kept in `index_meta`: {version, built, after}. A build clears the
// index, then walks the records in key order in chunks; each chunk's entries and the key it
// reached (`after`) commit in one transaction, so a build killed midway (kill -9) resumes after
// the last committed chunk on the next start, and re-putting an entry that exists changes
// nothing. `built: true` with the current version means the index is complete; writes keep it so
// from then on. A built index whose entry count disagrees with the record count (another program
// wrote the records without it, e.g. an older Troupe started on the data dir) is rebuilt.
import { performance } from "node:perf_hooks";
import type { Key, RecordsDb, Storage } from "../env.ts";
import type { AssistantRecord, CronRecord, StoreItemRecord, ThreadRecord } from "../records.ts";
import { applyIndexDiff, type IndexDb, type IndexEntry, type IndexKey } from "./index-db.ts";
import { threadEntries } from "./threads.ts";
import { assistantEntries } from "./assistants.ts";
import { cronEntries } from "./crons.ts";
import { storeItemEntries } from "./store-items.ts";

export interface IndexBuildState {
  /** index layout version this state is about */
  version: number;
  built: boolean;
  /** while building: the last record key whose entries are committed */
  after?: Key;
}

interface Indexed<R> {
  name: string;
  /** bump when the entries of a record change: the next start rebuilds the index */
  version: number;
  records: RecordsDb<R, Key>;
  index: IndexDb;
  entries(r: R): IndexEntry[];
  /** a key every record is under once (compared with the record count at start), if the index has one */
  all?: IndexKey;
}

/** Records indexed per transaction while building. */
const CHUNK = 5_000;
/** A progress line every this many records. */
const PROGRESS_EVERY = 50_000;

function indexedResources(s: Storage): Indexed<unknown>[] {
  const list = [
    { name: "threads", version: 1, records: s.threads, index: s.threadIndex, entries: threadEntries, all: ["@c"] } satisfies Indexed<ThreadRecord>,
    {
      name: "assistants",
      version: 1,
      records: s.assistants,
      index: s.assistantIndex,
      entries: assistantEntries,
      all: ["@c"],
    } satisfies Indexed<AssistantRecord>,
    { name: "crons", version: 1, records: s.crons, index: s.cronIndex, entries: cronEntries, all: ["@c"] } satisfies Indexed<CronRecord>,
    { name: "store items", version: 1, records: s.store, index: s.storeItemIndex, entries: storeItemEntries } satisfies Indexed<StoreItemRecord>,
  ];
  return list as unknown as Indexed<unknown>[];
}

/** Builds (or finishes building) every index that is not complete; prints a progress line while it works. */
export function ensureIndexes(s: Storage, log: (line: string) => void = (l) => console.log(`[troupe] ${l}`)): void {
  for (const r of indexedResources(s)) ensureIndex(s, r, log);
}

function ensureIndex<R>(s: Storage, r: Indexed<R>, log: (line: string) => void): void {
  s.root.resetReadTxn();
  const state = s.indexMeta.get(r.name);
  let after: Key | undefined;
  if (state?.version === r.version && state.built) {
    if (r.all === undefined) return;
    const indexed = r.index.getValuesCount(r.all);
    const records = r.records.getKeysCount();
    if (indexed === records) return;
    log(`${r.name} index lists ${indexed} of ${records} records: rebuilding it`);
  } else if (state?.version === r.version) {
    after = state.after;
  }
  const total = r.records.getKeysCount();
  if (after === undefined) {
    r.index.clearSync();
    s.indexMeta.putSync(r.name, { version: r.version, built: false });
  }
  const started = performance.now();
  let done = after === undefined ? 0 : r.records.getKeysCount({ end: after, inclusiveEnd: true });
  if (total > 0) log(`indexing ${r.name}: ${total} records${done > 0 ? ` (resuming after ${done})` : ""}`);
  for (;;) {
    s.root.resetReadTxn();
    const chunk = [...r.records.getRange({ ...(after === undefined ? {} : { start: after, exclusiveStart: true }), limit: CHUNK })];
    if (chunk.length === 0) break;
    const last = chunk[chunk.length - 1].key;
    s.root.transactionSync(() => {
      for (const { value } of chunk) applyIndexDiff(r.index, [], r.entries(value));
      s.indexMeta.put(r.name, { version: r.version, built: false, after: last });
    });
    after = last;
    if (Math.floor((done + chunk.length) / PROGRESS_EVERY) > Math.floor(done / PROGRESS_EVERY) && done + chunk.length < total) {
      log(`indexing ${r.name}: ${done + chunk.length} / ${total}`);
    }
    done += chunk.length;
  }
  s.indexMeta.putSync(r.name, { version: r.version, built: true });
  if (total > 0) log(`indexed ${done} ${r.name} in ${((performance.now() - started) / 1000).toFixed(1)} s`);
}
