// A database of its own for each test file (or each caller of createTestDatabase) on the test
// run's PostgreSQL server (test/helpers/postgres-server.ts), dropped afterwards. Files run in
// parallel: each database has a unique name, and dropping one disconnects only its own clients.
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import pg from "pg";
import { afterAll, beforeAll, inject } from "vitest";
import { openPostgresStorage, type PostgresStorage } from "../../src/storage/postgres/adapter.ts";

export interface TestDatabase {
  /** connection URI of the database */
  readonly uri: string;
  readonly name: string;
  /** drops the database (its open connections are closed by the server) */
  drop(): Promise<void>;
}

const READY_TIMEOUT_MS = 60_000;

let ready: Promise<string> | undefined;

/** The server's admin URI once it accepts connections (it starts in the background). */
export function postgresAdminUri(): Promise<string> {
  ready ??= waitUntilReady(inject("postgresAdminUri"));
  return ready;
}

/** A fresh, empty database. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const admin = await postgresAdminUri();
  const name = `troupe_test_${process.pid}_${randomBytes(5).toString("hex")}`;
  await withClient(admin, (c) => c.query(`CREATE DATABASE ${name}`));
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return {
    uri: url.toString(),
    name,
    drop: () => withClient(admin, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined),
  };
}

/** A database for the calling file (or describe block): created before its tests, dropped after. */
export function usePostgresDatabase(): { readonly uri: string } {
  let db: TestDatabase | undefined;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
    db = undefined;
  });
  return {
    get uri() {
      if (db === undefined) throw new Error("usePostgresDatabase: only inside a test");
      return db.uri;
    },
  };
}

/**
 * Two storages on one database for the calling file, as two cluster nodes' would be: `a` runs the
 * migrations, `b` opens on them (each with a small pool of its own).
 */
export function usePostgresNodePair(): { readonly a: PostgresStorage; readonly b: PostgresStorage; readonly uri: string } {
  const database = usePostgresDatabase();
  let a: PostgresStorage | undefined;
  let b: PostgresStorage | undefined;
  beforeAll(async () => {
    a = await openPostgresStorage({ uri: database.uri, maxConnections: 4 });
    b = await openPostgresStorage({ uri: database.uri, maxConnections: 4, migrate: false });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
  });
  const opened = (s: PostgresStorage | undefined): PostgresStorage => {
    if (s === undefined) throw new Error("usePostgresNodePair: only inside a test");
    return s;
  };
  return {
    get a() {
      return opened(a);
    },
    get b() {
      return opened(b);
    },
    get uri() {
      return database.uri;
    },
  };
}

async function withClient<T>(uri: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: uri });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

async function waitUntilReady(uri: string): Promise<string> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      await withClient(uri, (c) => c.query("SELECT 1"));
      return uri;
    } catch (err) {
      last = err;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  const log = inject("postgresLog");
  let tail = "";
  try {
    tail = log ? readFileSync(log, "utf8").slice(-4000) : "";
  } catch {
    tail = "(no server log)";
  }
  throw new Error(
    `the test PostgreSQL server at ${uri} did not accept connections within ${READY_TIMEOUT_MS / 1000} s: ${last instanceof Error ? last.message : String(last)}\n${tail}`,
  );
}

/**
 * A database for the calling file and the storage port's Postgres adapter on it (in `schema`),
 * opened before its tests and closed (the database dropped) after them.
 */
export function usePostgresStorage(opts: { schema?: string; maxConnections?: number } = {}): { readonly uri: string; readonly storage: PostgresStorage } {
  let db: TestDatabase | undefined;
  let storage: PostgresStorage | undefined;
  beforeAll(async () => {
    db = await createTestDatabase();
    storage = await openPostgresStorage({ uri: db.uri, schema: opts.schema ?? "troupe", maxConnections: opts.maxConnections ?? 4 });
  });
  afterAll(async () => {
    await storage?.close();
    await db?.drop();
    storage = undefined;
    db = undefined;
  });
  return {
    get uri() {
      if (db === undefined) throw new Error("usePostgresStorage: only inside a test");
      return db.uri;
    },
    get storage() {
      if (storage === undefined) throw new Error("usePostgresStorage: only inside a test");
      return storage;
    },
  };
}
