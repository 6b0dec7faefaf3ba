// Connections to a deployment's PostgreSQL database (node-postgres pool). Every connection works in
// one schema (search_path set at connect), so everything Troupe creates lives there.
import pg from "pg";
import { TroupeError } from "../../errors.ts";
import { trace } from "../../util/trace.ts";
import { traceDriver } from "./driver-trace.ts";

export interface PostgresOptions {
  /** postgres://user:password@host:port/database (DATABASE_URI) */
  uri: string;
  /** schema holding Troupe's tables (created by the migrations); default "public" */
  schema?: string;
  /** most connections this process opens; default 16 */
  maxConnections?: number;
  /**
   * wait for each commit's WAL flush (`--sync-commits`: the server's synchronous_commit, normally
   * on). Default false: Troupe's sessions commit with synchronous_commit=off, as LMDB commits
   * without fsync by default (docs/STORAGE.md, "Durability")
   */
  syncCommits?: boolean;
  /** this process's cluster node (setting troupe.node_id of every session: webhook_outbox.node_id's default) */
  nodeId?: string;
  /**
   * plan every prepared statement once per session (plan_cache_mode = force_generic_plan). For the
   * actor shards and the webhook worker, whose statements are the fixed per-run ones keyed by
   * thread: PostgreSQL otherwise kept planning some of them on every execution (a custom plan
   * looked cheaper for a fresh thread: the latest-checkpoint read, the run create), ~14% of its
   * CPU per run at wait-c64. Not for the HTTP thread: searches filter on skewed values (status,
   * metadata), where a plan made for the values given is worth its planning.
   */
  genericPlans?: boolean;
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

if (trace) traceDriver(trace);

export function openPostgres(opts: PostgresOptions): PostgresDb {
  const schema = opts.schema ?? "public";
  if (!IDENTIFIER.test(schema)) throw new TroupeError("BAD_REQUEST", `schema name must match ${IDENTIFIER.source}: ${JSON.stringify(schema)}`);
  const pool = new pg.Pool({
    connectionString: opts.uri,
    max: opts.maxConnections ?? 16,
    // the server's startup options: every statement on these connections resolves tables in the
    // schema; without syncCommits a commit returns once its WAL record is written, not flushed; a
    // cluster node's sessions carry its id (troupe.node_id: webhook_outbox.node_id's default);
    // genericPlans: prepared statements planned once per session
    options: `-c search_path=${schema}${opts.syncCommits === true ? "" : " -c synchronous_commit=off"}${opts.genericPlans === true ? " -c plan_cache_mode=force_generic_plan" : ""}${opts.nodeId === undefined ? "" : ` -c troupe.node_id=${nodeIdOption(opts.nodeId)}`}`,
    application_name: "troupe",
    // an unreachable server fails the opener (startup) instead of waiting out the OS's TCP timeout
    connectionTimeoutMillis: 10_000,
    // a client sends each query without waiting for the previous one's answer (still answered in
    // order): a thread's batched writes go as one round trip (write-chains.ts)
    pipeline: true,
  });
  // An idle connection the server dropped (restart, idle timeout) must not crash the process:
  // the pool discards it and the next query opens a new one.
  pool.on("error", () => undefined);
  return { pool, schema, close: () => pool.end() };
}
