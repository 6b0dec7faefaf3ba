// The LMDB adapter of the storage port (docs/STORAGE.md): each family over the one LMDB env of a
// data dir. Reads answer from lmdb-js' synchronous reads (a resolved promise); writes are the
// existing write transactions and batches.
import type { Storage } from "../env.ts";
import type { WiredStoragePort } from "../port.ts";
import { LmdbAssistants } from "./assistants.ts";
import { LmdbCrons } from "./crons.ts";
import { LmdbThreads } from "./threads.ts";
import { LmdbRuns } from "./runs.ts";
import { sweepExpiredItems } from "../store-ttl.ts";

/** The port over an open LMDB env (each JS thread opens its own env: storage/env.ts). */
export function lmdbStoragePort(env: Storage): WiredStoragePort {
  return {
    backend: "lmdb",
    assistants: new LmdbAssistants(env),
    crons: new LmdbCrons(env),
    threads: new LmdbThreads(env),
    runs: new LmdbRuns(env),
    store: {
      // loaded on first use: LmdbStore extends LangGraph's BaseStore, which pulls @langchain/core
      // (~470 modules, ~45 MB of heap) into a thread that may need none of it (the HTTP thread)
      open: async (opts) => new (await import("../store.ts")).LmdbStore(env, opts.ttl, opts.index),
      sweepExpired: (limit) => sweepExpiredItems(env, limit),
    },
    refreshReads: () => env.root.resetReadTxn(),
  };
}
