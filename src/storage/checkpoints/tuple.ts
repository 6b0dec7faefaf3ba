// Checkpoint tuples as LangGraph reads them: pending writes in the order live execution applies
// them, old-format pending sends, the config pair (both savers); and, for LMDB, a stored record
// turned into its tuple and the key walks of list().
import {
  TASKS,
  compareWritesSortKeys,
  maxChannelVersion,
  writesSortKey,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  type SerializerProtocol,
} from "@langchain/langgraph-checkpoint";
import type { Storage, StoredCheckpoint } from "../env.ts";
import { loadChannelValues } from "./blob-store.ts";
import { MAX_KEY, type CheckpointKey, type LmdbSaverContext, type StoredCheckpointBody } from "./lmdb-context.ts";

type ChannelVersion = ChannelVersions[string];

/** A stored pending write, as both savers keep it. */
export interface StoredPendingWrite {
  taskId: string;
  idx: number;
  channel: string;
  type: string;
  value: Uint8Array;
  /** "" when the writer gave none */
  taskPath: string;
}

/** Pending writes in writesSortKey order (the order live execution applies them), revived. */
export function revivePendingWrites(serde: SerializerProtocol, writes: readonly StoredPendingWrite[]): Promise<CheckpointPendingWrite[]> {
  const sorted = writes.map((w) => ({ sortKey: writesSortKey(w.taskPath, w.taskId, w.idx), w })).sort((a, b) => compareWritesSortKeys(a.sortKey, b.sortKey));
  return Promise.all(sorted.map(async ({ w }): Promise<CheckpointPendingWrite> => [w.taskId, w.channel, await serde.loadsTyped(w.type, w.value)]));
}

/**
 * Checkpoints older than format v4 kept pending sends as TASKS writes on their parent: they
 * become the checkpoint's TASKS channel (`initialVersion`: the saver's first version).
 */
export function migratePendingSends(checkpoint: Checkpoint, parentWrites: readonly CheckpointPendingWrite[], initialVersion: () => ChannelVersion): void {
  const sends = parentWrites.filter(([, channel]) => channel === TASKS).map(([, , value]) => value);
  const versions = Object.values(checkpoint.channel_versions);
  checkpoint.channel_values[TASKS] = sends;
  checkpoint.channel_versions[TASKS] = versions.length > 0 ? maxChannelVersion(...versions) : initialVersion();
}

/** The config of a checkpoint and of its parent, as a tuple carries them. */
export function tupleConfigs(threadId: string, ns: string, id: string, parentId: string | null): Pick<CheckpointTuple, "config" | "parentConfig"> {
  const configs: Pick<CheckpointTuple, "config" | "parentConfig"> = { config: { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: id } } };
  if (parentId !== null) configs.parentConfig = { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: parentId } };
  return configs;
}

/** A stored checkpoint record as its tuple (channel values from blobs, pending writes). */
export async function toTuple(
  ctx: LmdbSaverContext,
  key: CheckpointKey,
  record: StoredCheckpoint,
  initialVersion: () => ChannelVersion,
  loadedMetadata?: CheckpointMetadata,
): Promise<CheckpointTuple> {
  const [threadId, ns, id] = key;
  const { serde } = ctx;
  const body = (await serde.loadsTyped(record.type, record.checkpoint)) as StoredCheckpointBody;
  const checkpoint: Checkpoint = {
    ...body,
    channel_versions: body.channel_versions ?? {},
    channel_values: await loadChannelValues(ctx, threadId, ns, body.channel_versions ?? {}, record.tags),
  };
  if (checkpoint.v < 4 && record.parentId !== null) migratePendingSends(checkpoint, await loadWrites(ctx, threadId, ns, record.parentId), initialVersion);
  const { config, parentConfig } = tupleConfigs(threadId, ns, id, record.parentId);
  const tuple: CheckpointTuple = {
    config,
    checkpoint,
    metadata: loadedMetadata ?? ((await serde.loadsTyped(record.metadataType, record.metadata)) as CheckpointMetadata),
    pendingWrites: await loadWrites(ctx, threadId, ns, id),
  };
  if (parentConfig !== undefined) tuple.parentConfig = parentConfig;
  return tuple;
}

/** Pending writes of one checkpoint in writesSortKey order (the order live execution applies them). */
export async function loadWrites({ storage, serde }: LmdbSaverContext, threadId: string, ns: string, checkpointId: string): Promise<CheckpointPendingWrite[]> {
  const entries = Array.from(
    storage.writes.getRange({
      start: [threadId, ns, checkpointId],
      end: [threadId, ns, checkpointId, MAX_KEY],
    }),
  );
  if (entries.length === 0) return [];
  return revivePendingWrites(
    serde,
    entries.map(({ key, value }): StoredPendingWrite => ({
      taskId: key[3],
      idx: key[4],
      channel: value.channel,
      type: value.type,
      value: value.value,
      taskPath: value.taskPath ?? "",
    })),
  );
}

/** Keys read per range call while list() walks a namespace. */
const KEY_CHUNK = 128;

/** Keys of one (thread, ns), newest first, read in small synchronous chunks (no read txn spans an await). */
export function* namespaceKeysNewestFirst(storage: Storage, threadId: string, ns: string, beforeId: string): Generator<CheckpointKey> {
  let start: (string | Uint8Array)[] = [threadId, ns, beforeId || MAX_KEY];
  let exclusiveStart = beforeId !== "";
  for (;;) {
    const chunk = Array.from(storage.checkpoints.getKeys({ start, end: [threadId, ns], reverse: true, exclusiveStart, limit: KEY_CHUNK }));
    yield* chunk;
    if (chunk.length < KEY_CHUNK) return;
    start = chunk[chunk.length - 1];
    exclusiveStart = true;
  }
}

/** Keys of one thread or of every thread (optionally one namespace), ordered by checkpoint id, newest first. */
export function keysNewestFirst(storage: Storage, threadId: string | undefined, ns: string | undefined, beforeId: string): CheckpointKey[] {
  const range = threadId === undefined ? {} : { start: [threadId], end: [threadId, MAX_KEY] };
  const keys = Array.from(storage.checkpoints.getKeys(range)).filter((key) => (ns === undefined || key[1] === ns) && (beforeId === "" || key[2] < beforeId));
  return keys.sort((a, b) => compareDesc(a[2], b[2]) || compareDesc(b[0], a[0]) || compareDesc(b[1], a[1]));
}

function compareDesc(a: string, b: string): number {
  return a < b ? 1 : a > b ? -1 : 0;
}

/**
 * The tuple of a root checkpoint known in memory (a write still in flight: both savers' views),
 * from its serialized body and metadata, its channel values and its stored pending writes.
 */
export async function tupleFromSerialized(
  serde: SerializerProtocol,
  threadId: string,
  checkpoint: { id: string; parentId: string | null; bodyType: string; body: Uint8Array; metadataType: string; metadata: Uint8Array },
  values: Record<string, unknown>,
  writes: StoredPendingWrite[],
): Promise<CheckpointTuple> {
  const body = (await serde.loadsTyped(checkpoint.bodyType, checkpoint.body)) as Omit<Checkpoint, "channel_values">;
  const { config, parentConfig } = tupleConfigs(threadId, "", checkpoint.id, checkpoint.parentId);
  const tuple: CheckpointTuple = {
    config,
    checkpoint: { ...body, channel_versions: body.channel_versions ?? {}, channel_values: values },
    metadata: (await serde.loadsTyped(checkpoint.metadataType, checkpoint.metadata)) as CheckpointMetadata,
    pendingWrites: await revivePendingWrites(serde, writes),
  };
  if (parentConfig !== undefined) tuple.parentConfig = parentConfig;
  return tuple;
}
