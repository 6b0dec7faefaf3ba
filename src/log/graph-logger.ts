// The logger LangGraph Platform gives graphs: `getLogger()` of @langchain/langgraph-sdk/logging
// reads it from globalThis[Symbol.for("langgraph.api.sdk-logger")]. Registered in every thread
// that loads user code; its lines go to the structured log (component `graph`), tagged with the
// run, thread and node that logged them, read from the run config LangChain keeps in its
// AsyncLocalStorage while a node runs (no storage of our own, no cost outside these calls).
import { componentLog, type LogFields } from "./logger.ts";

const GLOBAL_LOGGER = Symbol.for("langgraph.api.sdk-logger");
/** where @langchain/core keeps its AsyncLocalStorage (shared by every copy of the library) */
const TRACING_ALS = Symbol.for("ls:tracing_async_local_storage");
/** the key of the runnable config in that storage's run tree */
const CHILD_CONFIG = Symbol.for("lc:child_config");

type Level = "error" | "warn" | "info" | "debug";

/** winston's level names (the SDK's Logger type) onto ours */
const LEVELS: Record<string, Level> = {
  error: "error",
  warn: "warn",
  info: "info",
  help: "info",
  data: "info",
  prompt: "info",
  http: "info",
  input: "info",
  verbose: "debug",
  debug: "debug",
  silly: "debug",
};

export type LeveledLogMethod = (message: unknown, ...meta: unknown[]) => GraphLogger;
export type GraphLogger = Record<keyof typeof LEVELS, LeveledLogMethod> & {
  log(level: string, message: unknown, ...meta: unknown[]): GraphLogger;
  child(fields: Record<string, unknown>): GraphLogger;
};

interface RunnableConfigLike {
  metadata?: Record<string, unknown>;
  configurable?: Record<string, unknown>;
}

/** The run, thread and node of the code calling now, when it runs inside a graph node. */
export function currentRunFields(): LogFields {
  const als = (globalThis as Record<symbol, { getStore(): unknown } | undefined>)[TRACING_ALS];
  const store = als?.getStore() as { extra?: Record<symbol, unknown> } | undefined;
  const config = store?.extra?.[CHILD_CONFIG] as RunnableConfigLike | undefined;
  if (!config) return {};
  const md = config.metadata ?? {};
  const cf = config.configurable ?? {};
  const out: LogFields = {};
  const put = (key: string, v: unknown) => {
    if (typeof v === "string" && v !== "") out[key] = v;
  };
  put("run_id", md.run_id ?? cf.run_id);
  put("thread_id", md.thread_id ?? cf.thread_id);
  put("graph_id", md.graph_id ?? cf.graph_id);
  put("assistant_id", md.assistant_id ?? cf.assistant_id);
  put("node", md.langgraph_node);
  return out;
}

function createGraphLogger(bound: Record<string, unknown> = {}): GraphLogger {
  const log = componentLog("graph");
  const write = (level: Level, message: unknown, meta: unknown[]): void => {
    if (!log.enabled(level)) return;
    const fields: LogFields = { ...bound };
    let msg: string;
    if (typeof message === "string") msg = message;
    else if (message instanceof Error) {
      msg = message.message;
      fields.err = message;
    } else if (message !== null && typeof message === "object") {
      const { message: m, ...rest } = message as Record<string, unknown>;
      msg = typeof m === "string" ? m : "";
      Object.assign(fields, rest);
    } else msg = String(message);
    const extra: unknown[] = [];
    for (const m of meta) {
      if (m instanceof Error) fields.err = m;
      else if (m !== null && typeof m === "object" && !Array.isArray(m)) Object.assign(fields, m);
      else extra.push(m);
    }
    if (extra.length > 0) fields.args = extra;
    Object.assign(fields, currentRunFields()); // the run's ids win over look-alike fields
    log[level](msg, fields);
  };
  const logger = {} as GraphLogger;
  for (const [name, level] of Object.entries(LEVELS)) {
    logger[name] = (message: unknown, ...meta: unknown[]) => {
      write(level, message, meta);
      return logger;
    };
  }
  logger.log = (level, message, ...meta) => {
    write(LEVELS[level] ?? "info", message, meta);
    return logger;
  };
  logger.child = (fields) => createGraphLogger({ ...bound, ...fields });
  return logger;
}

/** Makes getLogger() work in this thread (idempotent). */
export function registerGraphLogger(): void {
  const g = globalThis as Record<symbol, unknown>;
  if (g[GLOBAL_LOGGER] === undefined) g[GLOBAL_LOGGER] = createGraphLogger();
}
