// Which adapter a server's storage uses: the one place that knows both. Every thread that opens
// storage (the HTTP thread, each actor shard, the webhook worker) calls openStorage with the same
// config and gets the port; nothing outside src/storage/ knows which adapter runs.
import type { StoragePort } from "./port.ts";
import { openLmdbStorage } from "./lmdb/adapter.ts";

export interface StorageConfig {
  /** the data dir (LMDB: holds the data file; always holds the compiled modules and schemas) */
  dataDir: string;
  /** fsync every commit (LMDB); wait for each commit's WAL flush (PostgreSQL: synchronous_commit) */
  syncCommits?: boolean;
  /** the server's main thread at startup: the adapter prepares the storage (LMDB: builds missing indexes) */
  primary?: boolean;
  /** postgres://… (`--database-uri` / DATABASE_URI): the data lives in PostgreSQL, not in the data dir's LMDB */
  databaseUri?: string;
  /** this server's cluster node id (PostgreSQL: the sessions say which node wrote a webhook delivery) */
  nodeId?: string;
}

/** Opens one adapter's port; an adapter may load its modules (a driver) on first use. */
export type StorageAdapter = (config: StorageConfig) => Promise<StoragePort>;

/** The embedded default. */
export const lmdbAdapter: StorageAdapter = (config) =>
  Promise.resolve(openLmdbStorage(config.dataDir, { syncCommits: config.syncCommits, primary: config.primary }));

/**
 * PostgreSQL at `config.databaseUri`. The driver loads only here (an LMDB server never loads it).
 * Only the primary migrates: the other threads start after it has, and concurrent migrations would
 * contend on the migration lock for nothing.
 */
export const postgresAdapter: StorageAdapter = async (config) => {
  const uri = config.databaseUri;
  if (uri === undefined) throw new Error("postgresAdapter: no databaseUri");
  const { openPostgresStorage } = await import("./postgres/adapter.ts");
  try {
    // the other threads (actor shards, webhook worker) send fixed per-thread statements: planned once per session
    const storage = await openPostgresStorage({
      uri,
      migrate: config.primary === true,
      syncCommits: config.syncCommits,
      nodeId: config.nodeId,
      genericPlans: config.primary !== true,
    });
    // the migration reached the server; the other threads check it too, so a bad URI fails every opener alike
    if (config.primary !== true) await storage.db.pool.query("SELECT 1");
    return storage;
  } catch (err) {
    throw new StorageOpenError(`cannot open the database ${redactedUri(uri)}: ${(err as Error)?.message || String(err)}`);
  }
};

/** The configured storage cannot be opened (database unreachable, bad URI, refused login): startup fails with this one line. */
export class StorageOpenError extends Error {
  override name = "StorageOpenError";
}

/** The URI as logs may show it: without its password. */
export function redactedUri(uri: string): string {
  try {
    const u = new URL(uri);
    if (u.password !== "") u.password = "***";
    return u.toString();
  } catch {
    return "(unparsable URI)";
  }
}

/** The storage of a server: PostgreSQL when the config names a database, else LMDB (unless `adapter` is given). */
export function openStorage(
  config: StorageConfig,
  adapter: StorageAdapter = config.databaseUri === undefined ? lmdbAdapter : postgresAdapter,
): Promise<StoragePort> {
  return adapter(config);
}
