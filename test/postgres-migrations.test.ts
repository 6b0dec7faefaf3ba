// Versioned schema migrations on a real PostgreSQL: applied once, in order, by whichever of several
// processes or connections starting at the same time gets the advisory lock first.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { join } from "node:path";
import { migrate, schemaVersion } from "../src/storage/postgres/migrations.ts";
import { openPostgres, type PostgresDb } from "../src/storage/postgres/pool.ts";
import { MIGRATIONS, type Migration } from "../src/storage/postgres/schema.ts";
import { usePostgresDatabase } from "./helpers/postgres.ts";
import { REPO } from "./helpers/server.ts";

const database = usePostgresDatabase();
const latest = MIGRATIONS[MIGRATIONS.length - 1].version;
const opened: PostgresDb[] = [];
let schemas = 0;

function open(schema: string): PostgresDb {
  const db = openPostgres({ uri: database.uri, schema, maxConnections: 2 });
  opened.push(db);
  return db;
}

afterEach(async () => {
  await Promise.all(opened.splice(0).map((db) => db.close()));
});

const newSchema = () => `mig_${process.pid}_${++schemas}`;

async function appliedVersions(db: PostgresDb): Promise<number[]> {
  const rows = await db.pool.query<{ version: number }>(`SELECT version FROM ${db.schema}.troupe_migrations ORDER BY version`);
  return rows.rows.map((r) => r.version);
}

test("a new schema is created and brought to the latest version; a second run applies nothing", async () => {
  const db = open(newSchema());
  expect(await schemaVersion(db)).toBe(0);
  const first = await migrate(db);
  expect(first).toEqual({ from: 0, applied: MIGRATIONS.map((m) => m.version) });
  expect(await schemaVersion(db)).toBe(latest);
  const tables = await db.pool.query<{ table_name: string }>("SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name", [
    db.schema,
  ]);
  expect(tables.rows.map((r) => r.table_name)).toEqual([
    "assistant_versions",
    "assistants",
    "checkpoint_blobs",
    "checkpoint_chunks",
    "checkpoint_writes",
    "checkpoints",
    "cluster_commands",
    "cluster_nodes",
    "cluster_payloads",
    "cron_ticks",
    "crons",
    "runs",
    "store_items",
    "thread_leases",
    "thread_terms",
    "thread_ttls",
    "threads",
    "troupe_migrate_progress",
    "troupe_migrations",
    "troupe_row_counts",
    "webhook_outbox",
    "webhook_outcomes",
  ]);
  expect(await migrate(db)).toEqual({ from: latest, applied: [] });
});

test("a schema at version 1 (phase A: checkpoints only) gets the record tables, its checkpoints kept", async () => {
  const db = open(newSchema());
  expect(await migrate(db, MIGRATIONS.slice(0, 1))).toEqual({ from: 0, applied: [1] });
  await db.pool.query(
    "INSERT INTO checkpoints (thread_id, checkpoint_id, type, checkpoint, metadata_type, metadata) VALUES ('t', 'c', 'json', '\\x7b7d', 'json', '\\x7b7d')",
  );
  expect(await migrate(db)).toEqual({ from: 1, applied: MIGRATIONS.slice(1).map((m) => m.version) });
  const kept = await db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM checkpoints");
  expect(kept.rows[0].n).toBe(1);
  await db.pool.query("INSERT INTO threads (thread_id, status, created_at, updated_at, metadata, record) VALUES ('t', 'idle', 'a', 'a', '{}', '{}')");
});

test("a later migration is applied on top of an existing schema, and a failing one leaves the version where it was", async () => {
  const db = open(newSchema());
  await migrate(db);
  const next: Migration = { version: latest + 1, name: "extra", sql: "CREATE TABLE extra (id integer PRIMARY KEY)" };
  expect(await migrate(db, [...MIGRATIONS, next])).toEqual({ from: latest, applied: [latest + 1] });
  const broken: Migration = { version: latest + 2, name: "broken", sql: "CREATE TABLE half (id integer); SELECT no_such_function()" };
  await expect(migrate(db, [...MIGRATIONS, next, broken])).rejects.toThrow(/migration \d+ \(broken\) failed/);
  expect(await schemaVersion(db)).toBe(latest + 1);
  // the failed migration's first statement was rolled back with it
  const half = await db.pool.query<{ found: boolean }>("SELECT to_regclass($1) IS NOT NULL AS found", [`${db.schema}.half`]);
  expect(half.rows[0].found).toBe(false);
});

test("a schema newer than this Troupe is refused", async () => {
  const db = open(newSchema());
  await migrate(db);
  await db.pool.query(`INSERT INTO ${db.schema}.troupe_migrations (version, name) VALUES ($1, 'from the future')`, [latest + 5]);
  await expect(migrate(db)).rejects.toThrow(/newer than this Troupe knows/);
});

test("connections migrating the same schema at once: each migration runs once", async () => {
  const schema = newSchema();
  const slow = MIGRATIONS.map((m, i) => (i === 0 ? { ...m, sql: `SELECT pg_sleep(0.2);\n${m.sql}` } : m));
  const results = await Promise.all(Array.from({ length: 6 }, () => migrate(open(schema), slow)));
  const appliers = results.filter((r) => r.applied.length > 0);
  expect(appliers).toHaveLength(1);
  expect(appliers[0]).toEqual({ from: 0, applied: MIGRATIONS.map((m) => m.version) });
  for (const r of results) if (r !== appliers[0]) expect(r).toEqual({ from: latest, applied: [] });
  expect(await appliedVersions(open(schema))).toEqual(MIGRATIONS.map((m) => m.version));
});

test("processes starting at once against the same schema: one migrates, the others wait and find it done", async () => {
  const schema = newSchema();
  const startAt = Date.now() + 3_000; // all children are connected and waiting by then
  const run = promisify(execFile);
  const children = Array.from({ length: 4 }, () =>
    run(process.execPath, ["--import", "tsx", join(REPO, "test/fixtures/postgres/migrate-once.ts"), database.uri, schema, String(startAt)], { cwd: REPO }),
  );
  const outputs = await Promise.all(children);
  const results = outputs.map(({ stdout }) => JSON.parse(stdout.trim()) as { ok: boolean; error?: string; from: number; applied: number[] });
  for (const r of results) expect(r.error).toBeUndefined();
  expect(results.filter((r) => r.applied.length > 0)).toEqual([{ ok: true, from: 0, applied: MIGRATIONS.map((m) => m.version) }]);
  expect(results.filter((r) => r.applied.length === 0)).toHaveLength(3);
  expect(await appliedVersions(open(schema))).toEqual(MIGRATIONS.map((m) => m.version));
}, 60_000);
