// The storage port on PostgreSQL: every family on one connection pool and one schema, migrated at
// open. Writes of one thread (records and checkpoints) share the per-thread write chains.
import type { StoragePort, StorageUsage } from "../port.ts";
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
  readonly assistants: PostgresAssistants;
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
  const chains = new ThreadWriteChains(db.pool);
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
    usage: () => databaseUsage(db),
    releaseMemory: () => undefined,
    refreshReads: () => undefined,
    fences: chains,
    close: () => db.close(),
  };
}

/**
 * /metrics' storage size: the database's (pg_database_size: every file of it, other schemas too)
 * and our schema's tables with their indexes and TOAST. Read from the catalog: no table is scanned.
 */
async function databaseUsage(db: PostgresDb): Promise<StorageUsage | undefined> {
  try {
    const { rows } = await db.pool.query<{ file: string; used: string }>({ ...DATABASE_USAGE, values: [db.schema] });
    return { fileBytes: Number(rows[0].file), usedBytes: Number(rows[0].used) };
  } catch {
    return undefined; // the pool is closed (shutdown) or the server unreachable: no sample
  }
}

const DATABASE_USAGE = {
  name: "troupe_database_usage",
  text: `SELECT pg_database_size(current_database()) AS file,
    (SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c
      WHERE c.relnamespace = to_regnamespace($1) AND c.relkind IN ('r', 'm', 'p')) AS used`,
};
