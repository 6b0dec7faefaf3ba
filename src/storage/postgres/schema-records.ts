// Migration 2: the record tables of the storage port (assistants, threads, runs, crons, store
// items, webhook deliveries). docs/STORAGE.md explains the layout; in short:
/*
 * - Each record is kept as the caller wrote it (`record json`: exact text, key order kept, NUL
 *   characters allowed) with typed columns for what searches filter and sort on, and its
 *   metadata (store items: value) again as `jsonb` for filters, GIN-indexed (jsonb_path_ops).
 *   The jsonb copy spells NUL and U+E000 characters with an escape (json-columns.ts), as jsonb
 *   cannot hold NUL; filters are spelled the same way.
 * - Text columns that are compared or sorted are COLLATE "C" (byte order of UTF-8, which is code
 *   point order): ids, timestamps and names order as the LMDB adapter orders them, whatever the
 *   database's locale. Timestamps are the ISO strings of the records (what both adapters sort).
 * - Searches sort by a field, then created_at, then id, all in one direction: every sortable
 *   field has a btree index ending (created_at, id), so a page is an index walk that stops at
 *   offset + limit.
 * - runs: kwargs (the run's input, written once at create) apart from the rest of the record,
 *   so start/finish rewrite a small value; the partial index on pending/running runs is what
 *   recovery and bulk cancels read (LMDB's active_runs).
 * - No foreign keys: a thread's rows go together in one statement (threads.delete), and
 *   `troupe migrate` may copy tables in any order.
 */
import type { Migration } from "./schema.ts";

export const RECORD_TABLES: Migration = {
  version: 2,
  name: "records",
  sql: `
CREATE TABLE assistants (
  assistant_id text COLLATE "C" PRIMARY KEY,
  graph_id text COLLATE "C" NOT NULL,
  name text COLLATE "C" NOT NULL,
  -- the name as JavaScript lower-cases it (name filters are case-insensitive substrings)
  name_lower text COLLATE "C" NOT NULL,
  version integer NOT NULL,
  created_at text COLLATE "C" NOT NULL,
  updated_at text COLLATE "C" NOT NULL,
  metadata jsonb NOT NULL,
  record json NOT NULL
);
CREATE INDEX assistants_created ON assistants (created_at, assistant_id);
CREATE INDEX assistants_updated ON assistants (updated_at, created_at, assistant_id);
CREATE INDEX assistants_graph ON assistants (graph_id, created_at, assistant_id);
CREATE INDEX assistants_name ON assistants (name, created_at, assistant_id);
CREATE INDEX assistants_metadata ON assistants USING gin (metadata jsonb_path_ops);

CREATE TABLE assistant_versions (
  assistant_id text COLLATE "C" NOT NULL,
  version integer NOT NULL,
  metadata jsonb NOT NULL,
  record json NOT NULL,
  PRIMARY KEY (assistant_id, version)
);

CREATE TABLE threads (
  thread_id text COLLATE "C" PRIMARY KEY,
  status text COLLATE "C" NOT NULL,
  created_at text COLLATE "C" NOT NULL,
  updated_at text COLLATE "C" NOT NULL,
  metadata jsonb NOT NULL,
  record json NOT NULL,
  -- the latest state values as UTF-8 JSON (NULL: none); TOASTed, so run ends that leave them
  -- unchanged do not copy them
  values_json bytea
);
CREATE INDEX threads_created ON threads (created_at, thread_id);
CREATE INDEX threads_updated ON threads (updated_at, created_at, thread_id);
CREATE INDEX threads_status ON threads (status, created_at, thread_id);
CREATE INDEX threads_metadata ON threads USING gin (metadata jsonb_path_ops);

CREATE TABLE thread_ttls (
  thread_id text COLLATE "C" PRIMARY KEY,
  minutes double precision NOT NULL
);

CREATE TABLE runs (
  run_id text COLLATE "C" PRIMARY KEY,
  thread_id text COLLATE "C" NOT NULL,
  assistant_id text COLLATE "C" NOT NULL,
  status text COLLATE "C" NOT NULL,
  -- the record without kwargs
  record json NOT NULL,
  kwargs json NOT NULL
);
CREATE INDEX runs_thread ON runs (thread_id, run_id);
CREATE INDEX runs_active ON runs (thread_id, run_id) WHERE status IN ('pending', 'running');
CREATE INDEX runs_assistant ON runs (assistant_id, thread_id, run_id);

CREATE TABLE webhook_outbox (
  thread_id text COLLATE "C" NOT NULL,
  run_id text COLLATE "C" NOT NULL,
  next_attempt_at text COLLATE "C" NOT NULL,
  -- the delivery without its values
  record json NOT NULL,
  values_json bytea,
  PRIMARY KEY (thread_id, run_id)
);
CREATE INDEX webhook_outbox_due ON webhook_outbox (next_attempt_at);

CREATE TABLE webhook_outcomes (
  thread_id text COLLATE "C" NOT NULL,
  run_id text COLLATE "C" NOT NULL,
  record json NOT NULL,
  PRIMARY KEY (thread_id, run_id)
);

CREATE TABLE crons (
  cron_id text COLLATE "C" PRIMARY KEY,
  assistant_id text COLLATE "C" NOT NULL,
  thread_id text COLLATE "C",
  enabled boolean NOT NULL,
  next_run_date text COLLATE "C",
  end_time text COLLATE "C",
  created_at text COLLATE "C" NOT NULL,
  updated_at text COLLATE "C" NOT NULL,
  metadata jsonb NOT NULL,
  record json NOT NULL
);
CREATE INDEX crons_created ON crons (created_at, cron_id);
CREATE INDEX crons_updated ON crons (updated_at, created_at, cron_id);
CREATE INDEX crons_assistant ON crons (assistant_id, created_at, cron_id);
CREATE INDEX crons_thread ON crons (thread_id, created_at, cron_id) WHERE thread_id IS NOT NULL;
CREATE INDEX crons_next_run ON crons (next_run_date, created_at, cron_id);
-- next_run_date may be NULL: descending with nulls last is not the ascending index walked backward
CREATE INDEX crons_next_run_desc ON crons (next_run_date DESC NULLS LAST, created_at DESC, cron_id DESC);
CREATE INDEX crons_enabled ON crons (created_at, cron_id) WHERE enabled;
CREATE INDEX crons_metadata ON crons USING gin (metadata jsonb_path_ops);

CREATE TABLE store_items (
  namespace text[] COLLATE "C" NOT NULL,
  key text COLLATE "C" NOT NULL,
  -- the value as written (returned), and as jsonb for filters
  value json NOT NULL,
  fields jsonb NOT NULL,
  created_at text COLLATE "C" NOT NULL,
  updated_at text COLLATE "C" NOT NULL,
  ttl_minutes double precision,
  -- when the TTL runs out, in ms since the epoch (NULL: no TTL)
  expires_at double precision,
  -- embeddings of the item's indexed texts (semantic search), a JSON list of vectors
  vectors json,
  PRIMARY KEY (namespace, key)
);
CREATE INDEX store_items_fields ON store_items USING gin (fields jsonb_path_ops);
CREATE INDEX store_items_expiry ON store_items (expires_at) WHERE expires_at IS NOT NULL;

-- \`troupe migrate\`: how far a copy from each source got (src/storage/migrate/copy.ts)
CREATE TABLE troupe_migrate_progress (
  source text PRIMARY KEY,
  progress json NOT NULL
);

-- a thread's values as jsonb for a values filter, spelled as json-columns.ts spells jsonb copies
-- (NUL and U+E000 escaped); NULL when they are not JSON: such a thread matches no values filter
CREATE FUNCTION troupe_values_jsonb(v bytea) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
DECLARE
  t text := convert_from(v, 'UTF8');
BEGIN
  IF strpos(t, '\\u0000') > 0 OR strpos(t, U&'\\E000') > 0 THEN
    t := replace(replace(t, U&'\\E000', U&'\\E000\\E000'), '\\u0000', '\\ue000\\u0001');
  END IF;
  RETURN t::jsonb;
EXCEPTION WHEN others THEN
  RETURN NULL;
END
$fn$;
`,
};
