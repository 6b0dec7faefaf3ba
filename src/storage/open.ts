// Which adapter a server's storage uses: the one place that knows both. Every thread that opens
// storage (the HTTP thread, each actor shard, the webhook worker) calls openStorage with the same
// config and gets the port; nothing outside src/storage/ knows which adapter runs.
import type { StoragePort } from "./port.ts";
import { openLmdbStorage } from "./lmdb/adapter.ts";

export interface StorageConfig {
  /** the data dir (LMDB: holds the data file; always holds the compiled modules and schemas) */
  dataDir: string;
  /** fsync every commit (LMDB) */
  syncCommits?: boolean;
  /** the server's main thread at startup: the adapter prepares the storage (LMDB: builds missing indexes) */
  primary?: boolean;
}

/** Opens one adapter's port; an adapter may load its modules (a driver) on first use. */
export type StorageAdapter = (config: StorageConfig) => Promise<StoragePort>;

/** The embedded default. */
export const lmdbAdapter: StorageAdapter = (config) => Promise.resolve(openLmdbStorage(config.dataDir, { syncCommits: config.syncCommits, primary: config.primary }));

/**
 * The storage of a server. `adapter` picks the backend (LMDB unless given): the Postgres adapter
 * (`--database-uri`, issue 21) plugs in here.
 */
export function openStorage(config: StorageConfig, adapter: StorageAdapter = lmdbAdapter): Promise<StoragePort> {
  return adapter(config);
}
