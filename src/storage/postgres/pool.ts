// Connections to a deployment's PostgreSQL database (node-postgres pool). Every connection works in
// one schema (search_path set at connect), so everything Troupe creates lives there.
import pg from "pg";
import { TroupeError } from "../../errors.ts";

export interface PostgresOptions {
  /** postgres://user:password@host:port/database (DATABASE_URI) */
  uri: string;
  /** schema holding Troupe's tables (created by the migrations); default "public" */
  schema?: string;
  /** most connections this process opens; default 16 */
  maxConnections?: number;
  /** this process's cluster node (setting troupe.node_id of every session: webhook_outbox.node_id's default) */
  nodeId?: string;
}

export interface PostgresDb {
  readonly pool: pg.Pool;
  readonly schema: string;
  close(): Promise<void>;
}

/** A plain lower-case SQL identifier: safe to put in SQL text and in a search_path unquoted. */
const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

/** A node id as a startup option value (node ids are letters, digits, "." "_" "-": src/cluster/nodes.ts). */
function nodeIdOption(nodeId: string): string {
  if (!/^[A-Za-z0-9._-]+$/.test(nodeId)) throw new TroupeError("BAD_REQUEST", `node id must be letters, digits, ".", "_" or "-": ${JSON.stringify(nodeId)}`);
  return nodeId;
}

export function openPostgres(opts: PostgresOptions): PostgresDb {
  const schema = opts.schema ?? "public";
  if (!IDENTIFIER.test(schema)) throw new TroupeError("BAD_REQUEST", `schema name must match ${IDENTIFIER.source}: ${JSON.stringify(schema)}`);
  const pool = new pg.Pool({
    connectionString: opts.uri,
    max: opts.maxConnections ?? 16,
    // the server's startup options: every statement on these connections resolves tables in the schema
    options: `-c search_path=${schema}${opts.nodeId === undefined ? "" : ` -c troupe.node_id=${nodeIdOption(opts.nodeId)}`}`,
    application_name: "troupe",
    // an unreachable server fails the opener (startup) instead of waiting out the OS's TCP timeout
    connectionTimeoutMillis: 10_000,
  });
  // An idle connection the server dropped (restart, idle timeout) must not crash the process:
  // the pool discards it and the next query opens a new one.
  pool.on("error", () => undefined);
  return { pool, schema, close: () => pool.end() };
}
