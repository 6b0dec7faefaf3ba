// The storage port's adapters as the conformance suite (test/storage-port/) opens them: each
// factory gives a fresh, empty storage and a way to drop it. The same test cases run against every
// factory in STORAGE_FACTORIES (describe.each), so both adapters are held to one contract.
//
// The LMDB adapter of the port is written on branch issue-21b-port; until it lands, LMDB's answers
// are checked by the property test (search-property.test.ts compares Postgres with LMDB's own
// searches) and the LMDB factory joins this list when the adapter exists.
import type { StoragePort } from "../../src/storage/port.ts";
import { openPostgresStorage } from "../../src/storage/postgres/adapter.ts";
import type { StoreTtlOptions } from "../../src/bridge/messages.ts";
import { createTestDatabase } from "./postgres.ts";

export interface StorageUnderTest {
  readonly port: StoragePort;
  /** closes the storage and removes its data */
  dispose(): Promise<void>;
}

export interface StorageFactory {
  readonly name: string;
  open(opts?: { storeTtl?: StoreTtlOptions }): Promise<StorageUnderTest>;
}

export const postgresFactory: StorageFactory = {
  name: "postgres",
  async open(opts = {}) {
    const db = await createTestDatabase();
    const port = await openPostgresStorage({ uri: db.uri, schema: "troupe", maxConnections: 8, store: { ttl: opts.storeTtl } });
    return {
      port,
      async dispose() {
        await port.close();
        await db.drop();
      },
    };
  },
};

export const STORAGE_FACTORIES: readonly StorageFactory[] = [postgresFactory];
