// The checkpointer's SQL (tables: schema.ts). Each saver call is one statement, one round trip,
// atomic by itself; the statements are prepared once per connection (named).
import { fenceManySql, fenceManyValues, fenceSql, fencedStatements, type Fence } from "../../cluster/fence.ts";
import { byteaArray, textArray } from "./binary-arrays.ts";
import { acceptsFresh, type MergeKind } from "./write-chains.ts";

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
  /** every channel's version (as stored: its JSON text) */
  versions: Record<string, string>;
  /** the channels with a new version (their parent's refs are not inherited) */
  newVersions: string[];
  /** the refs of the channels this put writes: [version, owner] */
  ownRefs: Record<string, [string, string]>;
  blobs: { channel: string; version: string; type: string; bytes: Uint8Array; chunks: string | null }[];
  /** chunks sent */
  chunks: { channel: string; id: string; bytes: Uint8Array }[];
  /** chunks believed stored: checked, not sent (one missing fails the statement) */
  skipped: { channel: string; id: string }[];
  fence: Fence | undefined;
}

/*
 * The puts of a batch (write-chains.ts) as one statement, each doing what PUT_CHECKPOINT_OR_FAIL
 * (_FENCED) does: each gated by its own fence (a refused put writes nothing, `held` false in its
 * row); a missing chunk fails the statement. A statement sees the rows as they were before it, so
 * a put whose parent is an earlier put of the same statement cannot read that put's refs: the
 * client composes them (PUT_CHECKPOINTS.query) into what it inherits from the first ancestor
 * outside the statement (`inherit_from`, the refs whose version `keep` names) plus the refs the
 * puts in between wrote (`own_refs`) — what it would read from that put's committed row. Only
 * across puts of one holding: puts of two holdings are never both written (a lease row has one
 * epoch), and a put after a refused one reads the parent as it is stored, as it would after it.
 * Every row carries its thread (no joins: each part is a scan of its arrays); `held` is one array
 * by item ($14: epochs, NULL unfenced).
 */
const F_MANY_PUT = fenceManySql(35, "§troupe_fence");
const PUT_CHECKPOINTS_CTES = `
§items AS MATERIALIZED (
  SELECT u.thread_id, u.checkpoint_ns, u.checkpoint_id, u.parent_id, u.run_id, u.type, u.checkpoint, u.metadata_type, u.metadata,
    u.metadata_json::jsonb AS metadata_json, u.inherit_from, u.keep::jsonb AS keep, u.own_refs::jsonb AS own_refs, u.epoch, u.ord::int AS ord
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bytea[], $8::text[], $9::bytea[], $10::text[],
    $11::text[], $12::text[], $13::text[], $14::bigint[])
    WITH ORDINALITY u(thread_id, checkpoint_ns, checkpoint_id, parent_id, run_id, type, checkpoint, metadata_type, metadata, metadata_json,
      inherit_from, keep, own_refs, epoch, ord)
), ${F_MANY_PUT.cte}, §held AS MATERIALIZED (
  SELECT array_agg(${F_MANY_PUT.holdsFor("i.thread_id", "i.epoch")} ORDER BY i.ord) AS h FROM §items i
), §missing AS (
  SELECT count(*)::int AS n FROM unnest($30::text[], $31::text[], $32::text[], $33::text[]) k(thread_id, checkpoint_ns, channel, chunk_id)
  -- a lookup per chunk (as NOT EXISTS: a hash anti join over every stored chunk in the generic plan)
  WHERE (SELECT 1 FROM checkpoint_chunks c
    WHERE c.thread_id = k.thread_id AND c.checkpoint_ns = k.checkpoint_ns AND c.channel = k.channel AND c.chunk_id = k.chunk_id LIMIT 1) IS NULL
), §chunks AS (
  INSERT INTO checkpoint_chunks (thread_id, checkpoint_ns, channel, chunk_id, bytes)
  SELECT k.thread_id, k.checkpoint_ns, k.channel, k.chunk_id, k.bytes
  FROM unnest($24::int[], $25::text[], $26::text[], $27::text[], $28::text[], $29::bytea[]) k(ord, thread_id, checkpoint_ns, channel, chunk_id, bytes)
  WHERE (SELECT h FROM §held)[k.ord] AND (SELECT n FROM §missing) = 0
  ON CONFLICT DO NOTHING
), §blobs AS (
  INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, owner, type, blob, chunks)
  SELECT b.thread_id, b.checkpoint_ns, b.channel, b.version, b.owner, b.type, b.blob, string_to_array(b.chunks, ',')
  FROM unnest($15::int[], $16::text[], $17::text[], $18::text[], $19::text[], $20::text[], $21::text[], $22::bytea[], $23::text[])
    b(ord, thread_id, checkpoint_ns, owner, channel, version, type, blob, chunks)
  WHERE (SELECT h FROM §held)[b.ord] AND (SELECT n FROM §missing) = 0
  ON CONFLICT (thread_id, checkpoint_ns, channel, version, owner)
  DO UPDATE SET type = EXCLUDED.type, blob = EXCLUDED.blob, chunks = EXCLUDED.chunks
  RETURNING thread_id, checkpoint_ns, owner, channel, xmin::text AS stamp
), §saved AS (
  INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, type, checkpoint,
    metadata_type, metadata, metadata_json, blob_refs)
  SELECT i.thread_id, i.checkpoint_ns, i.checkpoint_id, i.parent_id, i.run_id, i.type, i.checkpoint, i.metadata_type, i.metadata, i.metadata_json,
    (SELECT coalesce(jsonb_object_agg(r.key, r.value), '{}'::jsonb)
      FROM checkpoints p, jsonb_each(p.blob_refs) r
      WHERE p.thread_id = i.thread_id AND p.checkpoint_ns = i.checkpoint_ns AND p.checkpoint_id = i.inherit_from
        AND (i.keep ->> r.key) = (r.value ->> 0)) || i.own_refs
  FROM §items i
  WHERE (SELECT h FROM §held)[i.ord] AND (SELECT n FROM §missing) = 0
  ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
    parent_checkpoint_id = EXCLUDED.parent_checkpoint_id, run_id = EXCLUDED.run_id, type = EXCLUDED.type,
    checkpoint = EXCLUDED.checkpoint, metadata_type = EXCLUDED.metadata_type, metadata = EXCLUDED.metadata,
    metadata_json = EXCLUDED.metadata_json, blob_refs = EXCLUDED.blob_refs
), §answer AS (
SELECT i.ord, (SELECT h FROM §held)[i.ord] AS held,
  CASE WHEN (SELECT n FROM §missing) = 0 THEN 0 ELSE ('message chunks missing: ' || (SELECT n FROM §missing))::int END AS missing,
  (SELECT array_agg(b.channel ORDER BY b.channel) FROM §blobs b
    WHERE b.thread_id = i.thread_id AND b.checkpoint_ns = i.checkpoint_ns AND b.owner = i.checkpoint_id) AS blob_channels,
  (SELECT array_agg(b.stamp ORDER BY b.channel) FROM §blobs b
    WHERE b.thread_id = i.thread_id AND b.checkpoint_ns = i.checkpoint_ns AND b.owner = i.checkpoint_id) AS blob_stamps
FROM §items i
)`;

const checkpointKey = (thread: string, ns: string, id: string): string => JSON.stringify([thread, ns, id]);
const putKeys = new WeakMap<readonly PutCheckpointItem[], Set<string>>();

/** What a put inherits: the refs of `from` (a stored checkpoint) whose version `keep` names, then `own`. */
interface Inheritance {
  from: string | null;
  keep: Record<string, string>;
  own: Record<string, [string, string]>;
}

/**
 * Each put's inheritance: from its parent as stored, or — when its parent is an earlier put of the
 * statement under the same holding — composed with that put's (its refs are the ones it inherits
 * plus its own; of those, this put keeps each channel whose version it still has).
 */
function inheritances(items: readonly PutCheckpointItem[]): Inheritance[] {
  const earlier = new Map<string, { item: PutCheckpointItem; inheritance: Inheritance }>();
  return items.map((item) => {
    const unchanged = (channel: string, version: string) => !item.newVersions.includes(channel) && item.versions[channel] === version;
    const parent = item.parentId === null ? undefined : earlier.get(checkpointKey(item.threadId, item.ns, item.parentId));
    let inheritance: Inheritance;
    if (parent === undefined || parent.item.fence?.epoch !== item.fence?.epoch) {
      const keep: Record<string, string> = {};
      for (const [channel, version] of Object.entries(item.versions)) if (!item.newVersions.includes(channel)) keep[channel] = version;
      inheritance = { from: item.parentId, keep, own: item.ownRefs };
    } else {
      const keep: Record<string, string> = {};
      for (const [channel, version] of Object.entries(parent.inheritance.keep)) if (unchanged(channel, version)) keep[channel] = version;
      const own: Record<string, [string, string]> = {};
      for (const [channel, ref] of Object.entries(parent.inheritance.own)) if (unchanged(channel, ref[0])) own[channel] = ref;
      inheritance = { from: parent.inheritance.from, keep, own: { ...own, ...item.ownRefs } };
    }
    earlier.set(checkpointKey(item.threadId, item.ns, item.checkpointId), { item, inheritance });
    return inheritance;
  });
}

export const PUT_CHECKPOINTS: MergeKind<PutCheckpointItem> = {
  accepts: acceptsFresh(putKeys, (i) => [checkpointKey(i.threadId, i.ns, i.checkpointId)]),
  name: "troupe_put_checkpoints",
  ctes: PUT_CHECKPOINTS_CTES,
  answers: [
    ["missing", "int"],
    ["blob_channels", "text[]"],
    ["blob_stamps", "text[]"],
  ],
  values(items): unknown[] {
    const col = <K extends keyof PutCheckpointItem>(k: K) => items.map((i) => i[k]);
    const inherited = inheritances(items);
    const blobs = items.flatMap((i, at) => i.blobs.map((b) => ({ ord: at + 1, item: i, ...b })));
    const chunks = items.flatMap((i, at) => i.chunks.map((c) => ({ ord: at + 1, item: i, ...c })));
    const skipped = items.flatMap((i) => i.skipped.map((c) => ({ item: i, ...c })));
    return [
      col("threadId"),
      col("ns"),
      col("checkpointId"),
      col("parentId"),
      col("runId"),
      col("type"),
      byteaArray(col("body")),
      col("metadataType"),
      byteaArray(col("metadata")),
      textArray(col("metadataJson")),
      inherited.map((h) => h.from),
      inherited.map((h) => JSON.stringify(h.keep)),
      inherited.map((h) => JSON.stringify(h.own)),
      items.map((i) => i.fence?.epoch ?? null),
      blobs.map((b) => b.ord),
      blobs.map((b) => b.item.threadId),
      blobs.map((b) => b.item.ns),
      blobs.map((b) => b.item.checkpointId),
      blobs.map((b) => b.channel),
      blobs.map((b) => b.version),
      blobs.map((b) => b.type),
      byteaArray(blobs.map((b) => b.bytes)),
      blobs.map((b) => b.chunks),
      chunks.map((c) => c.ord),
      chunks.map((c) => c.item.threadId),
      chunks.map((c) => c.item.ns),
      chunks.map((c) => c.channel),
      chunks.map((c) => c.id),
      byteaArray(chunks.map((c) => c.bytes)),
      skipped.map((c) => c.item.threadId),
      skipped.map((c) => c.item.ns),
      skipped.map((c) => c.channel),
      skipped.map((c) => c.id),
      ...fenceManyValues(items.map((i) => i.fence)),
    ];
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

// The putWrites of a batch as one statement: PUT_WRITES for each, each gated by its own fence
// (`held`: one array by item, $1: epochs). A statement never writes one row twice
// (PUT_WRITES_MANY.accepts): a putWrites repeating a row of one already in it starts the next
// statement, which then sees it as PUT_WRITES would.
const F_MANY_WRITES = fenceManySql(15, "§troupe_fence");
const PUT_WRITES_MANY_CTES = `
${F_MANY_WRITES.cte}, §held AS MATERIALIZED (
  SELECT array_agg(${F_MANY_WRITES.holdsFor("u.thread_id", "u.epoch")} ORDER BY u.ord) AS h
  FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY u(thread_id, epoch, ord)
), §put AS (
  INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path, run_id)
  SELECT w.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx, w.channel, w.type, w.blob, w.task_path, w.run_id
  FROM unnest($3::int[], $4::text[], $5::text[], $6::text[], $7::text[], $8::int[], $9::text[], $10::text[], $11::bytea[], $12::text[], $13::text[])
    w(ord, thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path, run_id)
  WHERE (SELECT h FROM §held)[w.ord]
  ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET
    channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob, task_path = EXCLUDED.task_path, run_id = EXCLUDED.run_id
  WHERE checkpoint_writes.idx < 0
), §answer AS (
  SELECT u.ord, (SELECT h FROM §held)[u.ord] AS held
  FROM generate_series(1, cardinality($1::text[])) u(ord)
)`;

const writeKeys = new WeakMap<readonly PutWritesItem[], Set<string>>();
const writeRowKeys = (i: PutWritesItem): string[] => i.rows.map((r) => JSON.stringify([i.threadId, i.ns, i.checkpointId, i.taskId, r.idx]));

export const PUT_WRITES_MANY: MergeKind<PutWritesItem> = {
  accepts: acceptsFresh(writeKeys, writeRowKeys),
  name: "troupe_put_writes_many",
  ctes: PUT_WRITES_MANY_CTES,
  answers: [],
  values(items): unknown[] {
    const rows = items.flatMap((i, at) => i.rows.map((r) => ({ ord: at + 1, item: i, ...r })));
    return [
      items.map((i) => i.threadId),
      items.map((i) => i.fence?.epoch ?? null),
      rows.map((r) => r.ord),
      rows.map((r) => r.item.threadId),
      rows.map((r) => r.item.ns),
      rows.map((r) => r.item.checkpointId),
      rows.map((r) => r.item.taskId),
      rows.map((r) => r.idx),
      rows.map((r) => r.channel),
      rows.map((r) => r.type),
      byteaArray(rows.map((r) => r.blob)),
      rows.map((r) => r.item.taskPath),
      rows.map((r) => r.item.runId),
      ...fenceManyValues(items.map((i) => i.fence)),
    ];
  },
};

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
