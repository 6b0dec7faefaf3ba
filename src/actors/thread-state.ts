// Thread-state operations that need the graph (state, history, update, supersteps) and the
// ThreadState wire shape (reference §2.4). Run inside the actor that owns the thread.
import { checkpointNotFound } from "../errors.ts";
import type { Json, JsonObject, ThreadRecord } from "../storage/records.ts";
import type { CompiledGraphLike, StateSnapshotLike } from "./graph-registry.ts";
import type { CheckpointSelector } from "../bridge/messages.ts";
import { isGraphInputError } from "./graph-input-errors.ts";
import { toPlain } from "./value-json.ts";

export const EMPTY_STATE: JsonObject = { values: {}, next: [], tasks: [], created_at: null, checkpoint: null, parent_checkpoint: null };

/**
 * The Checkpoint object (reference §2.4) a config addresses; null without a thread id, or without a
 * checkpoint id unless `requireId` is false (a subgraph task's config names only its namespace).
 */
export function checkpointOf(cfg: unknown, requireId = true): JsonObject | null {
  const c = typeof cfg === "object" && cfg !== null ? (cfg as { configurable?: Record<string, unknown> }).configurable : undefined;
  if (!c || typeof c.thread_id !== "string") return null;
  const id = typeof c.checkpoint_id === "string" && c.checkpoint_id !== "" ? c.checkpoint_id : null;
  if (id === null && requireId) return null;
  return {
    thread_id: c.thread_id,
    checkpoint_ns: typeof c.checkpoint_ns === "string" ? c.checkpoint_ns : "",
    checkpoint_id: id,
    checkpoint_map: (c.checkpoint_map as Json) ?? null,
  };
}

/**
 * The ThreadState of a snapshot. A subgraph's state nested in a task carries exactly upstream's
 * fields; the root's also has the flat `checkpoint_id` / `parent_checkpoint_id` older clients read.
 */
export function formatState(s: StateSnapshotLike, subgraphs: boolean, nested = false): JsonObject {
  const checkpoint = checkpointOf(s.config);
  const parent = checkpointOf(s.parentConfig);
  const metadata = { ...(s.metadata ?? {}) } as Record<string, unknown>;
  delete metadata.checkpoint_ns;
  return toPlain<JsonObject>({
    values: s.values ?? {},
    next: s.next ?? [],
    tasks: (s.tasks ?? []).map((t) => {
      const sub = t.state as StateSnapshotLike | { configurable?: Record<string, unknown> } | undefined;
      const isSnapshot = !!sub && typeof sub === "object" && "values" in sub;
      return {
        id: t.id,
        name: t.name,
        error: t.error == null ? null : typeof t.error === "string" ? t.error : ((t.error as Error).message ?? String(t.error)),
        interrupts: (t.interrupts ?? []).map((i) => ({ id: i.id, value: i.value })),
        path: t.path ?? [],
        checkpoint: !isSnapshot && sub ? ((sub as { configurable?: Record<string, unknown> }).configurable ?? null) : null,
        state: isSnapshot && subgraphs ? formatState(sub as StateSnapshotLike, subgraphs, true) : null,
        result: t.result ?? null,
      };
    }),
    metadata,
    created_at: s.createdAt ?? null,
    checkpoint,
    parent_checkpoint: parent,
    ...(nested ? {} : { checkpoint_id: checkpoint?.checkpoint_id ?? null, parent_checkpoint_id: parent?.checkpoint_id ?? null }),
  });
}

export function stateConfig(thread: ThreadRecord, sel?: CheckpointSelector): Record<string, unknown> {
  const configurable: Record<string, unknown> = { ...(thread.config.configurable ?? {}), thread_id: thread.thread_id };
  for (const k of ["checkpoint_id", "checkpoint_ns", "checkpoint_map"] as const) {
    delete configurable[k];
    if (sel?.[k] !== undefined && sel[k] !== null) configurable[k] = sel[k];
  }
  if (configurable.checkpoint_ns === undefined) configurable.checkpoint_ns = "";
  return { configurable };
}

/**
 * graph.getState, except when the latest checkpoint holds writes the graph cannot apply (a run
 * failed on its input, e.g. a message of an unknown role: LangGraph applies pending writes when it
 * reads the latest state, and would fail on every read until the next run). Then the state as
 * checkpointed, without those writes, which is where the next run starts.
 */
export async function currentState(graph: CompiledGraphLike, config: Record<string, unknown>, opts?: { subgraphs?: boolean }): Promise<StateSnapshotLike> {
  try {
    return await graph.getState(config, opts);
  } catch (err) {
    const addressed = (config.configurable as Record<string, unknown> | undefined)?.checkpoint_id !== undefined;
    if (addressed || !isGraphInputError(err)) throw err;
    for await (const snap of graph.getStateHistory(config, { limit: 1 })) return snap;
    throw err;
  }
}

export async function readState(graph: CompiledGraphLike, thread: ThreadRecord, sel: CheckpointSelector | undefined, subgraphs: boolean): Promise<JsonObject> {
  const snap = await currentState(graph, stateConfig(thread, sel), { subgraphs });
  // LangGraph answers a checkpoint it does not have with an empty snapshot of the config it was
  // given (no metadata, no creation time), not with an error
  if (sel?.checkpoint_id && (!snap.config?.configurable?.checkpoint_id || (snap.metadata === undefined && !snap.createdAt))) {
    throw checkpointNotFound(sel.checkpoint_id, thread.thread_id);
  }
  return formatState(snap, subgraphs);
}

export async function readHistory(
  graph: CompiledGraphLike,
  thread: ThreadRecord,
  opts: { limit: number; before?: string; metadata?: JsonObject; checkpoint?: CheckpointSelector },
): Promise<JsonObject[]> {
  const out: JsonObject[] = [];
  const options: Record<string, unknown> = { limit: opts.limit };
  if (opts.before)
    options.before = { configurable: { thread_id: thread.thread_id, checkpoint_ns: opts.checkpoint?.checkpoint_ns ?? "", checkpoint_id: opts.before } };
  if (opts.metadata) options.filter = opts.metadata;
  for await (const s of graph.getStateHistory(stateConfig(thread, opts.checkpoint), options)) {
    out.push(formatState(s, false));
    if (out.length >= opts.limit) break;
  }
  return out;
}
