// Brings a database's schema to the version this Troupe knows, at startup. Several processes may
// start at once (a cluster, or a restart overlapping the old server): they serialize on a
// session-level advisory lock, so each migration runs exactly once and the others find it applied.
import type pg from "pg";
import { TroupeError } from "../../errors.ts";
import { MIGRATIONS, type Migration } from "./schema.ts";
import type { PostgresDb } from "./pool.ts";

/** First key of the advisory lock: "troupe migrations" (the second key is the schema's hash). */
const LOCK_CLASS = 0x7472_6d67; // "trmg"

export interface MigrationResult {
  /** the schema's version before */
  from: number;
  /** versions this call applied (empty when another process had done it) */
  applied: number[];
}

export async function migrate(db: PostgresDb, migrations: readonly Migration[] = MIGRATIONS): Promise<MigrationResult> {
  const client = await db.pool.connect();
  let locked = false;
  try {
    await client.query("SELECT pg_advisory_lock($1, hashtext($2))", [LOCK_CLASS, db.schema]);
    locked = true;
    // the schema and the version table, under the lock: IF NOT EXISTS alone races in the catalog
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${db.schema}`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${db.schema}.troupe_migrations (
      version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
    const from = await currentVersion(client, db.schema);
    const known = migrations.length === 0 ? 0 : migrations[migrations.length - 1].version;
    if (from > known) {
      throw new TroupeError("INTERNAL", `database schema ${db.schema} is at version ${from}, newer than this Troupe knows (${known}): run a newer Troupe`);
    }
    const applied: number[] = [];
    for (const migration of migrations) {
      if (migration.version <= from) continue;
      await client.query("BEGIN");
      try {
        await client.query(migration.sql);
        await client.query(`INSERT INTO ${db.schema}.troupe_migrations (version, name) VALUES ($1, $2)`, [migration.version, migration.name]);
        await client.query("COMMIT");
      } catch (err) {
        await client.query("ROLLBACK");
        throw new TroupeError("INTERNAL", `migration ${migration.version} (${migration.name}) failed: ${err instanceof Error ? err.message : String(err)}`, {
          cause: err,
        });
      }
      applied.push(migration.version);
    }
    return { from, applied };
  } finally {
    if (locked) await client.query("SELECT pg_advisory_unlock($1, hashtext($2))", [LOCK_CLASS, db.schema]).catch(() => undefined);
    client.release();
  }
}

/** The schema's version: the highest applied migration, 0 for a new database. */
export async function schemaVersion(db: PostgresDb): Promise<number> {
  const exists = await db.pool.query<{ found: boolean }>("SELECT to_regclass($1) IS NOT NULL AS found", [`${db.schema}.troupe_migrations`]);
  if (!exists.rows[0].found) return 0;
  const client = await db.pool.connect();
  try {
    return await currentVersion(client, db.schema);
  } finally {
    client.release();
  }
}

async function currentVersion(client: pg.PoolClient, schema: string): Promise<number> {
  const result = await client.query<{ version: number | null }>(`SELECT max(version) AS version FROM ${schema}.troupe_migrations`);
  return result.rows[0].version ?? 0;
}
