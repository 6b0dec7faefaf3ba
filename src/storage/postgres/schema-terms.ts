// Migration 6: thread metadata terms, the Postgres counterpart of LMDB's `["m", key, value]` index
// entries (docs/ARCHITECTURE.md, "Secondary indexes"). A search by a metadata value, newest first,
// walks one btree range in order and stops at its page; its total is an index-only count of that
// range. The GIN index on metadata finds the same threads but in no order: every match's heap page
// was read, twice (page and total), so at 1M threads (1,000 matches) a search cost ~35 ms.
/*
 * - One row per thread and top-level metadata member whose value is a string, number, boolean or
 *   null: (term_key, term_value) spelled by troupe_term_key/troupe_term_value, the thread's
 *   created_at and id. Objects and arrays are not terms (their filters are subset/deep matches:
 *   the GIN index serves them), as on LMDB.
 * - Spellings: a number by its value (trim_scale: 1.0 and 1 are one term, as jsonb's = says), any
 *   value as its jsonb text otherwise (type-tagged by JSON itself: "1" and 1 differ); past 200
 *   bytes a key or value is spelled by its md5, so any metadata fits a btree row. A term only
 *   narrows the candidates: the search still applies the whole filter to each thread row, so a
 *   hash collision can never add a wrong match.
 * - A row trigger keeps them in the writing statement's transaction: inserted threads add their
 *   terms, deleted ones remove them, an update rewrites them only when metadata or created_at
 *   changed (a run's status and updated_at writes cost nothing here). TRUNCATE empties them.
 */
import type { Migration } from "./schema.ts";

/** a term's spellings, shared by the trigger and the queries (search-terms.ts) */
const SPELLINGS = `
CREATE FUNCTION troupe_term_spelling(s text) RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
  SELECT CASE WHEN octet_length(s) > 200 THEN 'md5:' || md5(s) ELSE s END
$fn$;
CREATE FUNCTION troupe_term_value(v jsonb) RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
  SELECT troupe_term_spelling(CASE WHEN jsonb_typeof(v) = 'number' THEN 'n:' || trim_scale(v::text::numeric)::text ELSE v::text END)
$fn$;
CREATE FUNCTION troupe_is_term(v jsonb) RETURNS boolean LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
  SELECT jsonb_typeof(v) IN ('string', 'number', 'boolean', 'null')
$fn$;
`;

export const THREAD_TERMS: Omit<Migration, "version"> = {
  name: "thread metadata terms",
  sql: `
${SPELLINGS}
CREATE TABLE thread_terms (
  term_key text COLLATE "C" NOT NULL,
  term_value text COLLATE "C" NOT NULL,
  term_created_at text COLLATE "C" NOT NULL,
  term_thread_id text COLLATE "C" NOT NULL,
  PRIMARY KEY (term_key, term_value, term_created_at, term_thread_id)
);

CREATE FUNCTION troupe_thread_terms() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF TG_OP = 'UPDATE' AND OLD.metadata = NEW.metadata AND OLD.created_at = NEW.created_at THEN
    RETURN NULL;
  END IF;
  IF TG_OP <> 'INSERT' AND jsonb_typeof(OLD.metadata) = 'object' THEN
    DELETE FROM thread_terms WHERE (term_key, term_value, term_created_at, term_thread_id) IN (
      SELECT troupe_term_spelling(e.key), troupe_term_value(e.value), OLD.created_at, OLD.thread_id
      FROM jsonb_each(OLD.metadata) e WHERE troupe_is_term(e.value));
  END IF;
  IF TG_OP <> 'DELETE' AND jsonb_typeof(NEW.metadata) = 'object' THEN
    INSERT INTO thread_terms (term_key, term_value, term_created_at, term_thread_id)
      SELECT troupe_term_spelling(e.key), troupe_term_value(e.value), NEW.created_at, NEW.thread_id
      FROM jsonb_each(NEW.metadata) e WHERE troupe_is_term(e.value)
      ON CONFLICT DO NOTHING;
  END IF;
  RETURN NULL;
END
$fn$;

CREATE FUNCTION troupe_thread_terms_truncated() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  TRUNCATE thread_terms;
  RETURN NULL;
END
$fn$;

CREATE TRIGGER threads_terms AFTER INSERT OR UPDATE OR DELETE ON threads FOR EACH ROW EXECUTE FUNCTION troupe_thread_terms();
CREATE TRIGGER threads_terms_truncated AFTER TRUNCATE ON threads FOR EACH STATEMENT EXECUTE FUNCTION troupe_thread_terms_truncated();

-- threads already there (CREATE TRIGGER has locked writers out until this migration commits)
INSERT INTO thread_terms (term_key, term_value, term_created_at, term_thread_id)
  SELECT troupe_term_spelling(e.key), troupe_term_value(e.value), t.created_at, t.thread_id
  FROM threads t, jsonb_each(CASE WHEN jsonb_typeof(t.metadata) = 'object' THEN t.metadata ELSE '{}'::jsonb END) e
  WHERE troupe_is_term(e.value)
  ON CONFLICT DO NOTHING;
`,
};

/*
 * Migration 8: the trigger removes a thread's old terms by primary key, one lookup per term. Its
 * `DELETE … WHERE (key, value, created_at, thread_id) IN (SELECT … FROM jsonb_each(OLD.metadata))`
 * got a hash semi join over a sequential scan of every term (a plan made for the table's size
 * when the session first ran the trigger, kept while it lived): on a fresh thread's first run (its
 * metadata gains graph_id and assistant_id, and there is nothing to remove) that scan was ~10% of
 * PostgreSQL's CPU per run at wait-c64 with ~5,000 terms, and grew with them. With all four key
 * columns equal the only plan is the primary key's; an empty old metadata costs no statement.
 */
export const THREAD_TERMS_DELETE_BY_KEY: Omit<Migration, "version"> = {
  name: "thread terms removed by key",
  sql: `
CREATE OR REPLACE FUNCTION troupe_thread_terms() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  old_term record;
BEGIN
  IF TG_OP = 'UPDATE' AND OLD.metadata = NEW.metadata AND OLD.created_at = NEW.created_at THEN
    RETURN NULL;
  END IF;
  IF TG_OP <> 'INSERT' AND jsonb_typeof(OLD.metadata) = 'object' THEN
    FOR old_term IN
      SELECT troupe_term_spelling(e.key) AS term_key, troupe_term_value(e.value) AS term_value
      FROM jsonb_each(OLD.metadata) e WHERE troupe_is_term(e.value)
    LOOP
      DELETE FROM thread_terms
      WHERE term_key = old_term.term_key AND term_value = old_term.term_value
        AND term_created_at = OLD.created_at AND term_thread_id = OLD.thread_id;
    END LOOP;
  END IF;
  IF TG_OP <> 'DELETE' AND jsonb_typeof(NEW.metadata) = 'object' THEN
    INSERT INTO thread_terms (term_key, term_value, term_created_at, term_thread_id)
      SELECT troupe_term_spelling(e.key), troupe_term_value(e.value), NEW.created_at, NEW.thread_id
      FROM jsonb_each(NEW.metadata) e WHERE troupe_is_term(e.value)
      ON CONFLICT DO NOTHING;
  END IF;
  RETURN NULL;
END
$fn$;
`,
};
