// The checkpointer's SQL (tables: schema.ts). Each saver call is one statement, one round trip,
// atomic by itself; the statements are prepared once per connection (named).
import type pg from "pg";
import { fenceManySql, fenceManyValues, fenceSql, fencedStatements, type Fence } from "../../cluster/fence.ts";
import type { MergeKind } from "./write-chains.ts";

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

/** A put's values, for a statement writing several (PUT_CHECKPOINTS). */
export interface PutCheckpointItem {
  threadId: string;
  ns: string;
  checkpointId: string;
  parentId: string | null;
  runId: string | null;
  type: string;
  body: Uint8Array;
  metadataType: string;
  metadata: Uint8Array;
  metadataJson: string | null;
  /** JSON: every channel's version (as stored) */
  versions: string;
  /** the channels with a new version (their parent refs are not inherited) */
  newVersions: string[];
  /** JSON: the refs of the channels this put writes */
  ownRefs: string;
  blobs: { channel: string; version: string; type: string; bytes: Uint8Array; chunks: string | null }[];
  /** chunks sent */
  chunks: { channel: string; id: string; bytes: Uint8Array }[];
  /** chunks believed stored: checked, not sent (one missing fails the statement) */
  skipped: { channel: string; id: string }[];
  fence: Fence | undefined;
}

// The puts of a batch (write-chains.ts) as one statement, with what PUT_CHECKPOINT_OR_FAIL(_FENCED)
// does for each: items numbered by their place (ord); each put gated by its own fence (a refused
// one writes nothing, held false in its row); a missing chunk fails the statement. A put whose
// parent is an earlier put of the statement that is written inherits from that put's refs (refs:
// recursive), as it would read them from the committed row if sent after it; the others from the
// stored parent. A statement never holds two puts of one checkpoint (PUT_CHECKPOINTS.accepts).
const F_MANY_PUT = fenceManySql(29);
const PUT_CHECKPOINTS_TEXT = `
WITH RECURSIVE items AS MATERIALIZED (
  SELECT u.thread_id, u.checkpoint_ns, u.checkpoint_id, u.parent_id, u.run_id, u.type, u.checkpoint, u.metadata_type, u.metadata,
    u.metadata_json::jsonb AS metadata_json, u.versions::jsonb AS versions, u.new_versions::jsonb AS new_versions,
    u.own_refs::jsonb AS own_refs, u.epoch, u.ord::int AS ord
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bytea[], $8::text[], $9::bytea[], $10::text[],
    $11::text[], $12::text[], $13::text[], $14::bigint[])
    WITH ORDINALITY u(thread_id, checkpoint_ns, checkpoint_id, parent_id, run_id, type, checkpoint, metadata_type, metadata, metadata_json,
      versions, new_versions, own_refs, epoch, ord)
), ${F_MANY_PUT.cte}, held AS MATERIALIZED (
  SELECT i.ord, ${F_MANY_PUT.holdsFor("i.thread_id", "i.epoch")} AS held FROM items i
), missing AS (
  SELECT count(*)::int AS n FROM unnest($25::int[], $26::text[], $27::text[]) k(ord, channel, chunk_id) JOIN items i ON i.ord = k.ord
  WHERE NOT EXISTS (SELECT 1 FROM checkpoint_chunks c
    WHERE c.thread_id = i.thread_id AND c.checkpoint_ns = i.checkpoint_ns AND c.channel = k.channel AND c.chunk_id = k.chunk_id)
), refs AS (
  SELECT i.ord, (
    SELECT coalesce(jsonb_object_agg(r.key, r.value), '{}'::jsonb)
    FROM checkpoints p, jsonb_each(p.blob_refs) r
    WHERE p.thread_id = i.thread_id AND p.checkpoint_ns = i.checkpoint_ns AND p.checkpoint_id = i.parent_id
      AND NOT (i.new_versions ? r.key) AND (i.versions ->> r.key) = (r.value ->> 0)
  ) || i.own_refs AS refs
  FROM items i
  WHERE NOT EXISTS (SELECT 1 FROM items q JOIN held h ON h.ord = q.ord AND h.held
    WHERE q.ord < i.ord AND q.thread_id = i.thread_id AND q.checkpoint_ns = i.checkpoint_ns AND q.checkpoint_id = i.parent_id)
  UNION ALL
  SELECT i.ord, (
    SELECT coalesce(jsonb_object_agg(r.key, r.value), '{}'::jsonb)
    FROM jsonb_each(p.refs) r
    WHERE NOT (i.new_versions ? r.key) AND (i.versions ->> r.key) = (r.value ->> 0)
  ) || i.own_refs
  FROM refs p JOIN items q ON q.ord = p.ord JOIN held h ON h.ord = q.ord AND h.held
  JOIN items i ON i.thread_id = q.thread_id AND i.checkpoint_ns = q.checkpoint_ns AND i.parent_id = q.checkpoint_id AND i.ord > q.ord
), chunks AS (
  INSERT INTO checkpoint_chunks (thread_id, checkpoint_ns, channel, chunk_id, bytes)
  SELECT i.thread_id, i.checkpoint_ns, k.channel, k.chunk_id, k.bytes
  FROM unnest($21::int[], $22::text[], $23::text[], $24::bytea[]) k(ord, channel, chunk_id, bytes)
  JOIN items i ON i.ord = k.ord JOIN held h ON h.ord = k.ord
  WHERE h.held AND (SELECT n FROM missing) = 0
  ON CONFLICT DO NOTHING
), blobs AS (
  INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, owner, type, blob, chunks)
  SELECT i.thread_id, i.checkpoint_ns, b.channel, b.version, i.checkpoint_id, b.type, b.blob, string_to_array(b.chunks, ',')
  FROM unnest($15::int[], $16::text[], $17::text[], $18::text[], $19::bytea[], $20::text[]) b(ord, channel, version, type, blob, chunks)
  JOIN items i ON i.ord = b.ord JOIN held h ON h.ord = b.ord
  WHERE h.held AND (SELECT n FROM missing) = 0
  ON CONFLICT (thread_id, checkpoint_ns, channel, version, owner)
  DO UPDATE SET type = EXCLUDED.type, blob = EXCLUDED.blob, chunks = EXCLUDED.chunks
  RETURNING thread_id, checkpoint_ns, owner, channel, xmin::text AS stamp
), saved AS (
  INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, type, checkpoint,
    metadata_type, metadata, metadata_json, blob_refs)
  SELECT i.thread_id, i.checkpoint_ns, i.checkpoint_id, i.parent_id, i.run_id, i.type, i.checkpoint,
    i.metadata_type, i.metadata, i.metadata_json, r.refs
  FROM items i JOIN refs r ON r.ord = i.ord JOIN held h ON h.ord = i.ord
  WHERE h.held AND (SELECT n FROM missing) = 0
  ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
    parent_checkpoint_id = EXCLUDED.parent_checkpoint_id, run_id = EXCLUDED.run_id, type = EXCLUDED.type,
    checkpoint = EXCLUDED.checkpoint, metadata_type = EXCLUDED.metadata_type, metadata = EXCLUDED.metadata,
    metadata_json = EXCLUDED.metadata_json, blob_refs = EXCLUDED.blob_refs
)
SELECT h.ord, h.held,
  CASE WHEN (SELECT n FROM missing) = 0 THEN 0 ELSE ('message chunks missing: ' || (SELECT n FROM missing))::int END AS missing,
  w.blob_channels, w.blob_stamps
FROM held h JOIN items i ON i.ord = h.ord
LEFT JOIN LATERAL (
  SELECT array_agg(b.channel ORDER BY b.channel) AS blob_channels, array_agg(b.stamp ORDER BY b.channel) AS blob_stamps FROM blobs b
  WHERE b.thread_id = i.thread_id AND b.checkpoint_ns = i.checkpoint_ns AND b.owner = i.checkpoint_id
) w ON true`;

const checkpointKey = (thread: string, ns: string, id: string): string => JSON.stringify([thread, ns, id]);
const putKeys = new WeakMap<readonly PutCheckpointItem[], Set<string>>();

export const PUT_CHECKPOINTS: MergeKind<PutCheckpointItem> = {
  accepts: (items, item) => fresh(putKeys, items, [checkpointKey(item.threadId, item.ns, item.checkpointId)], (i) => [checkpointKey(i.threadId, i.ns, i.checkpointId)]),
  query(items): pg.QueryConfig {
    const col = <K extends keyof PutCheckpointItem>(k: K) => items.map((i) => i[k]);
    const blobs = items.flatMap((i, at) => i.blobs.map((b) => ({ ord: at + 1, ...b })));
    const chunks = items.flatMap((i, at) => i.chunks.map((c) => ({ ord: at + 1, ...c })));
    const skipped = items.flatMap((i, at) => i.skipped.map((c) => ({ ord: at + 1, ...c })));
    return {
      name: "troupe_put_checkpoints",
      text: PUT_CHECKPOINTS_TEXT,
      values: [
        col("threadId"),
        col("ns"),
        col("checkpointId"),
        col("parentId"),
        col("runId"),
        col("type"),
        col("body"),
        col("metadataType"),
        col("metadata"),
        col("metadataJson"),
        col("versions"),
        items.map((i) => JSON.stringify(i.newVersions)),
        col("ownRefs"),
        items.map((i) => i.fence?.epoch ?? null),
        blobs.map((b) => b.ord),
        blobs.map((b) => b.channel),
        blobs.map((b) => b.version),
        blobs.map((b) => b.type),
        blobs.map((b) => b.bytes),
        blobs.map((b) => b.chunks),
        chunks.map((c) => c.ord),
        chunks.map((c) => c.channel),
        chunks.map((c) => c.id),
        chunks.map((c) => c.bytes),
        skipped.map((c) => c.ord),
        skipped.map((c) => c.channel),
        skipped.map((c) => c.id),
        ...fenceManyValues(items.map((i) => i.fence)),
      ],
    };
  },
};

/** A putWrites' values, for a statement writing several (PUT_WRITES_MANY). */
export interface PutWritesItem {
  threadId: string;
  ns: string;
  checkpointId: string;
  taskId: string;
  taskPath: string;
  runId: string | null;
  rows: { idx: number; channel: string; type: string; blob: Uint8Array }[];
  fence: Fence | undefined;
}

// The putWrites of a batch as one statement: PUT_WRITES for each, each gated by its own fence.
// A statement never writes one row twice (PUT_WRITES_MANY.accepts): a putWrites repeating a row
// of one already in it starts the next statement, which then sees it as PUT_WRITES would.
const F_MANY_WRITES = fenceManySql(14);
const PUT_WRITES_MANY_TEXT = `
WITH items AS MATERIALIZED (
  SELECT u.thread_id, u.checkpoint_ns, u.checkpoint_id, u.task_id, u.task_path, u.run_id, u.epoch, u.ord::int AS ord
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[])
    WITH ORDINALITY u(thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, run_id, epoch, ord)
), ${F_MANY_WRITES.cte}, held AS MATERIALIZED (
  SELECT i.ord, ${F_MANY_WRITES.holdsFor("i.thread_id", "i.epoch")} AS held FROM items i
), put AS (
  INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path, run_id)
  SELECT i.thread_id, i.checkpoint_ns, i.checkpoint_id, i.task_id, w.idx, w.channel, w.type, w.blob, i.task_path, i.run_id
  FROM unnest($8::int[], $9::int[], $10::text[], $11::text[], $12::bytea[]) w(ord, idx, channel, type, blob)
  JOIN items i ON i.ord = w.ord JOIN held h ON h.ord = w.ord
  WHERE h.held
  ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET
    channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob, task_path = EXCLUDED.task_path, run_id = EXCLUDED.run_id
  WHERE checkpoint_writes.idx < 0
)
SELECT ord, held FROM held`;

const writeKeys = new WeakMap<readonly PutWritesItem[], Set<string>>();
const writeRowKeys = (i: PutWritesItem): string[] => i.rows.map((r) => JSON.stringify([i.threadId, i.ns, i.checkpointId, i.taskId, r.idx]));

export const PUT_WRITES_MANY: MergeKind<PutWritesItem> = {
  accepts: (items, item) => fresh(writeKeys, items, writeRowKeys(item), writeRowKeys),
  query(items): pg.QueryConfig {
    const rows = items.flatMap((i, at) => i.rows.map((r) => ({ ord: at + 1, ...r })));
    return {
      name: "troupe_put_writes_many",
      text: PUT_WRITES_MANY_TEXT,
      values: [
        items.map((i) => i.threadId),
        items.map((i) => i.ns),
        items.map((i) => i.checkpointId),
        items.map((i) => i.taskId),
        items.map((i) => i.taskPath),
        items.map((i) => i.runId),
        items.map((i) => i.fence?.epoch ?? null),
        rows.map((r) => r.ord),
        rows.map((r) => r.idx),
        rows.map((r) => r.channel),
        rows.map((r) => r.type),
        rows.map((r) => r.blob),
        ...fenceManyValues(items.map((i) => i.fence)),
      ],
    };
  },
};

/** Whether none of `keys` is written by `items` (their keys kept per items array); if so they are now. */
function fresh<I>(known: WeakMap<readonly I[], Set<string>>, items: readonly I[], keys: string[], keysOf: (item: I) => string[]): boolean {
  let set = known.get(items);
  if (set === undefined) known.set(items, (set = new Set(items.flatMap(keysOf))));
  if (keys.some((k) => set.has(k))) return false;
  for (const k of keys) set.add(k);
  return true;
}

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
