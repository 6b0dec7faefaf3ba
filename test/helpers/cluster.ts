// Cluster tests: a migrated database for the file, pools opened on it and closed after each test.
import { migrate } from "../../src/storage/postgres/migrations.ts";
import { openPostgres, type PostgresDb } from "../../src/storage/postgres/pool.ts";
import { usePostgresDatabase } from "./postgres.ts";

export interface ClusterDatabase {
  readonly uri: string;
  /** a new pool on the file's database (its own connections: another "node") */
  open(maxConnections?: number): PostgresDb;
}

export function useClusterDatabase(): ClusterDatabase {
  const database = usePostgresDatabase();
  const opened: PostgresDb[] = [];
  beforeAll(async () => {
    const db = openPostgres({ uri: database.uri, maxConnections: 1 });
    try {
      await migrate(db);
    } finally {
      await db.close();
    }
  });
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((db) => db.close()));
  });
  return {
    get uri() {
      return database.uri;
    },
    open(maxConnections = 4) {
      const db = openPostgres({ uri: database.uri, maxConnections });
      opened.push(db);
      return db;
    },
  };
}
