// The LMDB adapter of the storage port (docs/STORAGE.md): each family over the one LMDB env of a
// data dir. Reads answer from lmdb-js' synchronous reads (a resolved promise); writes are the
// existing write transactions and batches.
import { statSync } from "node:fs";
import { dataFilePath, openStorage, type Storage, type StorageOptions } from "../env.ts";
import { ensureIndexes } from "../indexes/build.ts";
import { releaseFileMapping } from "../../util/native-memory.ts";
import type { CheckpointSavers, StoragePort } from "../port.ts";
import { LmdbAssistants } from "./assistants.ts";
import { LmdbCrons } from "./crons.ts";
import { LmdbThreads } from "./threads.ts";
import { LmdbRuns } from "./runs.ts";
import { LmdbWebhooks } from "./webhooks.ts";
import { sweepExpiredItems } from "../store-ttl.ts";

/** The port over an open LMDB env (each JS thread opens its own env: storage/env.ts); `dataFile` for usage(). */
export function lmdbStoragePort(env: Storage, dataFile?: string): StoragePort {
  let savers: Promise<CheckpointSavers> | undefined;
  return {
    backend: "lmdb",
    assistants: new LmdbAssistants(env),
    crons: new LmdbCrons(env),
    threads: new LmdbThreads(env),
    runs: new LmdbRuns(env),
    webhooks: new LmdbWebhooks(env),
    checkpoints: {
      open: () => (savers ??= import("./checkpoints.ts").then((m) => m.lmdbCheckpointSavers(env))),
    },
    store: {
      // loaded on first use: LmdbStore extends LangGraph's BaseStore, which pulls @langchain/core
      // (~470 modules, ~45 MB of heap) into a thread that may need none of it (the HTTP thread)
      open: async (opts) => new (await import("../store.ts")).LmdbStore(env, opts.ttl, opts.index),
      sweepExpired: (limit) => sweepExpiredItems(env, limit),
    },
    usage: async () => {
      if (dataFile === undefined) return undefined;
      try {
        const st = env.root.getStats() as { pageSize: number; lastPageNumber: number };
        return { fileBytes: statSync(dataFile).size, usedBytes: (st.lastPageNumber + 1) * st.pageSize };
      } catch {
        return undefined; // the file is gone or the env closed (shutdown)
      }
    },
    // the read-only map keeps every page a burst touched resident (the page cache keeps them)
    releaseMemory: () => void (dataFile !== undefined && releaseFileMapping(dataFile)),
    refreshReads: () => env.root.resetReadTxn(),
    close: () => env.close(),
  };
}

/**
 * Opens a data dir's LMDB env (this JS thread's own handle) and the port over it. `primary`: the
 * server's main thread at startup, which first builds any index the data dir lacks (a data dir
 * from before the indexes, or a build cut short), before anything reads or writes.
 */
export function openLmdbStorage(dataDir: string, opts: StorageOptions & { primary?: boolean } = {}): StoragePort {
  const env = openStorage(dataDir, opts);
  if (opts.primary) ensureIndexes(env);
  return lmdbStoragePort(env, dataFilePath(dataDir));
}
