// The checkpointer's SQL (tables: schema.ts). Each saver call is one statement, one round trip,
// atomic by itself; the statements are prepared once per connection (named).
import { fenceSql, fencedStatements } from "../../cluster/fence.ts";

/**
 * A put: the checkpoint row (its blob refs: the parent's for channels whose version did not
 * change, plus its own), its channel blobs and the message chunks not known stored. $22/$23 list
 * chunks the saver believes stored and did not send: if one is missing (removed by another
 * process since), nothing is written and `missing` > 0 tells the saver to send them all again.
 * Answers the xmin of each blob row it wrote (blob_channels, blob_stamps): the blob cache's stamps.
 */
export const PUT_CHECKPOINT = {
  name: "troupe_put_checkpoint",
  text: `
WITH missing AS (
  SELECT count(*)::int AS n FROM unnest($22::text[], $23::text[]) k(channel, chunk_id)
  WHERE NOT EXISTS (SELECT 1 FROM checkpoint_chunks c
    WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 AND c.channel = k.channel AND c.chunk_id = k.chunk_id)
), chunks AS (
  INSERT INTO checkpoint_chunks (thread_id, checkpoint_ns, channel, chunk_id, bytes)
  SELECT $1, $2, k.channel, k.chunk_id, k.bytes FROM unnest($19::text[], $20::text[], $21::bytea[]) k(channel, chunk_id, bytes)
  WHERE (SELECT n FROM missing) = 0
  ON CONFLICT DO NOTHING
), blobs AS (
  INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, owner, type, blob, chunks)
  SELECT $1, $2, b.channel, b.version, $3, b.type, b.blob, string_to_array(b.chunks, ',')
  FROM unnest($14::text[], $15::text[], $16::text[], $17::bytea[], $18::text[]) b(channel, version, type, blob, chunks)
  WHERE (SELECT n FROM missing) = 0
  ON CONFLICT (thread_id, checkpoint_ns, channel, version, owner)
  DO UPDATE SET type = EXCLUDED.type, blob = EXCLUDED.blob, chunks = EXCLUDED.chunks
  RETURNING channel, xmin::text AS stamp
), inherited AS (
  SELECT coalesce(jsonb_object_agg(r.key, r.value), '{}'::jsonb) AS refs
  FROM checkpoints p, jsonb_each(p.blob_refs) r
  WHERE p.thread_id = $1 AND p.checkpoint_ns = $2 AND p.checkpoint_id = $4
    AND NOT (r.key = ANY($12::text[])) AND ($11::jsonb ->> r.key) = (r.value ->> 0)
), saved AS (
  INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, type, checkpoint,
    metadata_type, metadata, metadata_json, blob_refs)
  SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb, (SELECT refs FROM inherited) || $13::jsonb
  WHERE (SELECT n FROM missing) = 0
  ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
    parent_checkpoint_id = EXCLUDED.parent_checkpoint_id, run_id = EXCLUDED.run_id, type = EXCLUDED.type,
    checkpoint = EXCLUDED.checkpoint, metadata_type = EXCLUDED.metadata_type, metadata = EXCLUDED.metadata,
    metadata_json = EXCLUDED.metadata_json, blob_refs = EXCLUDED.blob_refs
)
SELECT n AS missing, (SELECT array_agg(channel) FROM blobs) AS blob_channels, (SELECT array_agg(stamp) FROM blobs) AS blob_stamps FROM missing`,
};

/**
 * PUT_CHECKPOINT inside a batch of writes (write-chains.ts): a missing chunk fails the statement
 * (and so the batch, which then runs each write alone) instead of answering `missing`.
 */
export const PUT_CHECKPOINT_OR_FAIL = {
  name: "troupe_put_checkpoint_or_fail",
  text: PUT_CHECKPOINT.text.replace("SELECT n AS missing,", "SELECT CASE WHEN n = 0 THEN 0 ELSE ('message chunks missing: ' || n)::int END AS missing,"),
};

// Cluster mode: the puts' fenced twins (docs/CLUSTER.md "Fencing"): the lease fence's CTE first,
// its condition on every write, `held` answered; its two values follow the statement's own.
const F_PUT = fenceSql(24);
const PUT_WRITES_GATE = "WHERE (SELECT n FROM missing) = 0";

function fencedPut(text: string): string {
  const parts = text.split(PUT_WRITES_GATE);
  const fenced = parts
    .join(`${PUT_WRITES_GATE} AND ${F_PUT.holds}`)
    .replace("WITH missing AS (", `WITH ${F_PUT.cte}, missing AS (`)
    .replace(/\nSELECT (n AS missing|CASE WHEN n = 0)/, `\nSELECT ${F_PUT.holds} AS held, $1`);
  // a guard for edits of PUT_CHECKPOINT: every write gated, the fence and `held` in place
  if (parts.length !== 4 || !fenced.includes(F_PUT.cte) || !fenced.includes("AS held"))
    throw new Error("PUT_CHECKPOINT changed: its fenced twin must gate each of its writes");
  return fenced;
}

export const PUT_CHECKPOINT_FENCED = { name: "troupe_put_checkpoint_fenced", text: fencedPut(PUT_CHECKPOINT.text) };
export const PUT_CHECKPOINT_OR_FAIL_FENCED = { name: "troupe_put_checkpoint_or_fail_fenced", text: fencedPut(PUT_CHECKPOINT_OR_FAIL.text) };

/**
 * Pending writes: regular ones (idx >= 0) are first-wins (a retried task must not replace them),
 * special ones (errors, interrupts: idx < 0) overwrite.
 */
export const PUT_WRITES = fencedStatements("troupe_put_writes", (g) => [
  [
    "put",
    `INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path, run_id)
SELECT $1, $2, $3, $4, w.idx, w.channel, w.type, w.blob, $5, $6
FROM unnest($7::int[], $8::text[], $9::text[], $10::bytea[]) w(idx, channel, type, blob)${g.where}
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET
  channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob, task_path = EXCLUDED.task_path, run_id = EXCLUDED.run_id
WHERE checkpoint_writes.idx < 0`,
  ],
]);

/**
 * Checkpoint rows with their channel values and pending writes, one row per checkpoint: a
 * chunked message list comes back reassembled ("[" chunks "," tail "]", message-chunks.ts) with
 * `complete` false if one of its chunks is missing. The values (and the writes' values) come as
 * one bytea each, cut by their lengths (splitBytes).
 */
const TUPLE_COLUMNS = `
SELECT c.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.type, c.checkpoint, c.metadata_type, c.metadata,
  v.channels, v.versions, v.owners, v.stamps, v.types, v.blobs, v.blob_lengths, coalesce(v.complete, true) AS complete,
  w.task_ids, w.idxs, w.channels AS write_channels, w.types AS write_types, w.blobs AS write_blobs, w.blob_lengths AS write_blob_lengths, w.task_paths
FROM checkpoints c
LEFT JOIN LATERAL (
  SELECT array_agg(r.key ORDER BY r.key) AS channels,
    array_agg(r.value ->> 0 ORDER BY r.key) AS versions,
    array_agg(r.value ->> 1 ORDER BY r.key) AS owners,
    -- the blob row's xmin: changes with every write of it (the saver's blob cache stamp)
    array_agg(b.stamp ORDER BY r.key) AS stamps,
    array_agg(b.type ORDER BY r.key) AS types,
    -- the values as one bytea and their lengths: a bytea[] would be parsed character by character
    -- by the driver (postgres-array), a bytea by Buffer.from(hex)
    string_agg(x.bytes, ''::bytea ORDER BY r.key) AS blobs,
    array_agg(length(x.bytes) ORDER BY r.key) AS blob_lengths,
    bool_and(b.chunks IS NULL OR k.found = cardinality(b.chunks)) AS complete
  FROM jsonb_each(c.blob_refs) r
  -- lateral: one primary-key lookup per ref (a join lets the planner hash every blob of the thread)
  JOIN LATERAL (
    SELECT b1.*, b1.xmin::text AS stamp FROM checkpoint_blobs b1
    WHERE b1.thread_id = c.thread_id AND b1.checkpoint_ns = c.checkpoint_ns AND b1.channel = r.key
      AND b1.version = r.value ->> 0 AND b1.owner = r.value ->> 1
    LIMIT 1 -- keeps the planner from flattening the lookup into a join
  ) b ON true
  LEFT JOIN LATERAL (
    SELECT string_agg(ch.bytes, decode('2c', 'hex') ORDER BY u.ord) AS joined, count(ch.bytes)::int AS found
    FROM unnest(b.chunks) WITH ORDINALITY u(id, ord)
    LEFT JOIN LATERAL (
      SELECT ch1.bytes FROM checkpoint_chunks ch1
      WHERE ch1.thread_id = b.thread_id AND ch1.checkpoint_ns = b.checkpoint_ns AND ch1.channel = b.channel AND ch1.chunk_id = u.id
      LIMIT 1
    ) ch ON true
  ) k ON b.chunks IS NOT NULL
  CROSS JOIN LATERAL (
    SELECT CASE WHEN b.chunks IS NULL THEN b.blob
      ELSE decode('5b', 'hex') || coalesce(k.joined, ''::bytea)
        || CASE WHEN length(b.blob) > 0 THEN decode('2c', 'hex') || b.blob ELSE ''::bytea END || decode('5d', 'hex') END AS bytes
  ) x
) v ON true
LEFT JOIN LATERAL (
  SELECT array_agg(x.task_id ORDER BY x.task_id, x.idx) AS task_ids, array_agg(x.idx ORDER BY x.task_id, x.idx) AS idxs,
    array_agg(x.channel ORDER BY x.task_id, x.idx) AS channels, array_agg(x.type ORDER BY x.task_id, x.idx) AS types,
    string_agg(x.blob, ''::bytea ORDER BY x.task_id, x.idx) AS blobs, array_agg(length(x.blob) ORDER BY x.task_id, x.idx) AS blob_lengths,
    array_agg(x.task_path ORDER BY x.task_id, x.idx) AS task_paths
  FROM checkpoint_writes x
  WHERE x.thread_id = c.thread_id AND x.checkpoint_ns = c.checkpoint_ns AND x.checkpoint_id = c.checkpoint_id
) w ON true`;

export const GET_TUPLE_BY_ID = {
  name: "troupe_get_tuple_by_id",
  text: `${TUPLE_COLUMNS}
WHERE c.thread_id = $1 AND c.checkpoint_ns = $2 AND c.checkpoint_id = $3`,
};

export const GET_LATEST_TUPLE = {
  name: "troupe_get_latest_tuple",
  text: `${TUPLE_COLUMNS}
WHERE c.thread_id = $1 AND c.checkpoint_ns = $2
ORDER BY c.checkpoint_id DESC LIMIT 1`,
};

/** Tuples by key, in no particular order. */
export const GET_TUPLES = {
  name: "troupe_get_tuples",
  text: `${TUPLE_COLUMNS}
JOIN unnest($1::text[], $2::text[], $3::text[]) key(thread_id, checkpoint_ns, checkpoint_id)
  ON c.thread_id = key.thread_id AND c.checkpoint_ns = key.checkpoint_ns AND c.checkpoint_id = key.checkpoint_id`,
};

/** Pending writes of checkpoints, for pre-v4 checkpoints' pending sends. */
export const GET_WRITES = {
  name: "troupe_get_writes",
  text: `SELECT task_id, idx, channel, type, blob, task_path FROM checkpoint_writes
WHERE thread_id = $1 AND checkpoint_ns = $2 AND checkpoint_id = $3`,
};

/**
 * Blobs of a thread that no checkpoint names any more, and then the chunks of their slots that
 * no remaining blob names. Run after whatever removes checkpoints, in its transaction.
 */
export const COLLECT_UNNAMED_BLOBS = `
WITH gone AS (
  DELETE FROM checkpoint_blobs b
  WHERE b.thread_id = $1 AND NOT EXISTS (
    SELECT 1 FROM checkpoints c
    WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns
      AND c.blob_refs -> b.channel ->> 0 = b.version AND c.blob_refs -> b.channel ->> 1 = b.owner)
  RETURNING b.checkpoint_ns, b.channel, b.version, b.owner
)
SELECT DISTINCT checkpoint_ns, channel FROM gone`;

export const COLLECT_UNNAMED_CHUNKS = `
DELETE FROM checkpoint_chunks k
USING unnest($2::text[], $3::text[]) slot(checkpoint_ns, channel)
WHERE k.thread_id = $1 AND k.checkpoint_ns = slot.checkpoint_ns AND k.channel = slot.channel
  AND NOT EXISTS (
    SELECT 1 FROM checkpoint_blobs b
    WHERE b.thread_id = k.thread_id AND b.checkpoint_ns = k.checkpoint_ns AND b.channel = k.channel AND k.chunk_id = ANY(b.chunks))`;
