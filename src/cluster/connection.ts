// Dedicated connections (LISTEN, advisory-lock sessions) opened with the pool's own settings:
// these must outlive any single query, so they are never taken from the pool.
import pg from "pg";
import type { PostgresDb } from "../storage/postgres/pool.ts";

export interface DedicatedOptions {
  /** application_name shown in pg_stat_activity */
  name: string;
  /** client-side bound on each query, so a silent network never blocks a health check */
  queryTimeoutMs?: number;
}

export function dedicatedClient(db: PostgresDb, opts: DedicatedOptions): pg.Client {
  const { connectionString, options, host, port, user, password, database, ssl } = db.pool.options;
  const client = new pg.Client({
    connectionString,
    options,
    host,
    port,
    user,
    password,
    database,
    ssl,
    application_name: opts.name,
    keepAlive: true,
    query_timeout: opts.queryTimeoutMs,
  });
  return client;
}

/** Quotes an identifier (a LISTEN channel) for SQL text. */
export const quoteIdent = (name: string): string => `"${name.replaceAll('"', '""')}"`;
