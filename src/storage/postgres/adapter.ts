// The storage port on PostgreSQL: every family on one connection pool and one schema, migrated at
// open. Writes of one thread (records and checkpoints) share the per-thread write chains.
import type { StoragePort } from "../port.ts";
import { PostgresAssistants } from "./assistants.ts";
import { PostgresCrons } from "./crons.ts";
import { migrate } from "./migrations.ts";
import { openPostgres, type PostgresDb, type PostgresOptions } from "./pool.ts";
import { PostgresRuns } from "./runs.ts";
import { sweepExpiredItems } from "./store-sweep.ts";
import { PostgresThreads } from "./threads.ts";
import { PostgresWebhooks } from "./webhooks.ts";
import { ThreadWriteChains } from "./write-chains.ts";

export interface PostgresStorageOptions extends PostgresOptions {
  /** apply missing migrations at open (default true) */
  migrate?: boolean;
}

export interface PostgresStorage extends StoragePort {
  readonly backend: "postgres";
  readonly db: PostgresDb;
  readonly threads: PostgresThreads;
  readonly runs: PostgresRuns;
  readonly webhooks: PostgresWebhooks;
}

export async function openPostgresStorage(opts: PostgresStorageOptions): Promise<PostgresStorage> {
  const db = openPostgres(opts);
  try {
    if (opts.migrate !== false) await migrate(db);
  } catch (err) {
    await db.close();
    throw err;
  }
  return postgresStorage(db);
}

/** The port on an open (migrated) database. */
export function postgresStorage(db: PostgresDb): PostgresStorage {
  const chains = new ThreadWriteChains();
  return {
    backend: "postgres",
    db,
    assistants: new PostgresAssistants(db.pool),
    threads: new PostgresThreads(db.pool, chains),
    runs: new PostgresRuns(db.pool, chains),
    // loaded on first use, as on LMDB
    checkpoints: { open: async () => (await import("./checkpoints.ts")).postgresCheckpointSavers(db, chains) },
    store: {
      // loaded on first use, as on LMDB: PostgresStore extends LangGraph's BaseStore (@langchain/core)
      open: async (opts) => new (await import("./store.ts")).PostgresStore(db.pool, opts),
      sweepExpired: (limit) => sweepExpiredItems(db.pool, limit),
    },
    crons: new PostgresCrons(db.pool),
    webhooks: new PostgresWebhooks(db.pool),
    // the database's size is the server's to report (pg_database_size), not this process's memory map
    usage: () => undefined,
    releaseMemory: () => undefined,
    refreshReads: () => undefined,
    close: () => db.close(),
  };
}
