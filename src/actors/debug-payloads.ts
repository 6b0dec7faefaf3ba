// `debug` and `tasks` stream payloads as LangGraph Platform sends them (reference §7.3): LangGraph.js
// emits checkpoints with camelCase `parentConfig`, internal `__pregel_*` configurable keys and a
// subgraph task's config as `state`; the server adds `checkpoint` / `parent_checkpoint` objects,
// renames `parent_config`, drops internal keys and callbacks, and turns a task's config into its
// `checkpoint`.
import { checkpointOf } from "./thread-state.ts";

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

function configurableOf(config: unknown): Obj | undefined {
  return isObj(config) && isObj(config.configurable) ? config.configurable : undefined;
}

function withoutInternals(config: unknown): unknown {
  const c = configurableOf(config);
  if (c === undefined) return config;
  const { callbacks: _callbacks, ...rest } = config as Obj;
  return { ...rest, configurable: Object.fromEntries(Object.entries(c).filter(([key]) => !key.startsWith("__"))) };
}

/** A task (debug `task_result`, a checkpoint's tasks, `tasks` mode): a subgraph's config `state` becomes its `checkpoint`. */
export function taskPayload(task: unknown): unknown {
  if (!isObj(task)) return task;
  const checkpoint = checkpointOf(task.state, false);
  if (checkpoint === null) return task;
  const { state: _state, ...rest } = task;
  return { ...rest, checkpoint };
}

export function debugCheckpointPayload(payload: Obj): Obj {
  const { parentConfig, ...rest } = payload;
  return {
    ...rest,
    config: withoutInternals(payload.config),
    parent_config: withoutInternals(parentConfig),
    tasks: Array.isArray(payload.tasks) ? payload.tasks.map(taskPayload) : payload.tasks,
    checkpoint: checkpointOf(payload.config),
    parent_checkpoint: checkpointOf(parentConfig),
  };
}

/** A `debug` mode chunk `{step, type, timestamp, payload}` with its payload converted. */
export function debugChunk(chunk: unknown): unknown {
  if (!isObj(chunk) || !isObj(chunk.payload)) return chunk;
  if (chunk.type === "checkpoint") return { ...chunk, payload: debugCheckpointPayload(chunk.payload) };
  if (chunk.type === "task_result") return { ...chunk, payload: taskPayload(chunk.payload) };
  return chunk;
}
