// LangChain runs every runnable call of a graph (each node, branch and channel write) in its
// AsyncLocalStorage with a LangSmith RunTree as the store (AsyncLocalStorageProviderSingleton
// .runWithConfig), traced or not. When no tracer takes the call it builds a fresh root tree that is
// never sent (tracingEnabled: false) and only carries the config; its constructor defines 33
// properties one by one and reads the environment: ~23 µs, ~7 times per run of the echo graph,
// 9% of a shard's CPU at wait-c64 (bench/RESULTS.md, session 26). We give the storage a copy of a
// template tree that LangChain itself made instead (~0.5 µs): a RunTree of the same class, fields
// and values, with its own id, start time, dotted order and mutable parts, as the constructor
// would set them. Calls a tracer takes (LangSmith tracing on) are LangChain's own, untouched.
import { randomUUID } from "node:crypto";

/** where LangChain keeps the runnable config in a run tree (@langchain/core's LC_CHILD_KEY) */
const CHILD_CONFIG = Symbol.for("lc:child_config");
/** where it keeps context variables (setContextVariable), carried from the enclosing store */
const CONTEXT_VARIABLES = Symbol.for("lc:context_variables");

interface Storage {
  getStore(): unknown;
  run<T>(store: unknown, callback: () => T): T;
}

type RunWithConfig = (config: unknown, callback: () => unknown, avoidCreatingRootRunTree?: boolean) => unknown;

/** @langchain/core's AsyncLocalStorageProviderSingleton, as far as we use it */
interface ProviderSingleton {
  runWithConfig: RunWithConfig;
  getInstance(): Storage;
}

interface RunTreeFields {
  id: string;
  trace_id: string;
  start_time: number;
  dotted_order: string;
  _serialized_start_time?: string;
  extra: Record<string | symbol, unknown>;
  child_runs: unknown[];
  serialized: object;
  inputs: object;
  caller_options: object;
  createChild?: unknown;
  postRun?: unknown;
  [CONTEXT_VARIABLES]?: unknown;
}

const installed = new WeakSet<object>();

const isProvider = (v: unknown): v is ProviderSingleton =>
  typeof v === "object" &&
  v !== null &&
  typeof (v as ProviderSingleton).runWithConfig === "function" &&
  typeof (v as ProviderSingleton).getInstance === "function";

/** a root tree as LangChain makes it: the fields we renew are there, with the values they have there */
function isRootTree(v: unknown, config: unknown): v is RunTreeFields {
  const t = v as RunTreeFields | undefined;
  return (
    typeof t === "object" &&
    t !== null &&
    typeof t.createChild === "function" &&
    typeof t.postRun === "function" &&
    t.extra?.[CHILD_CONFIG] === config &&
    typeof t.id === "string" &&
    t.trace_id === t.id &&
    typeof t.start_time === "number" &&
    typeof t.dotted_order === "string" &&
    t.dotted_order === `${stamp(t.start_time).replace(/[-:.]/g, "")}${t.id}` &&
    Array.isArray(t.child_runs)
  );
}

/** the start time as the tree writes it: ISO with the execution order (1, a root's) as microseconds */
const stamp = (ms: number): string => `${new Date(ms).toISOString().slice(0, -1)}001Z`;

/** a UUID v7 of `ms` (the tree's id is uuid7 of its start time): the time in the first 48 bits, then random */
function uuid7(ms: number): string {
  const t = ms.toString(16).padStart(12, "0");
  return `${t.slice(0, 8)}-${t.slice(8, 12)}-7${randomUUID().slice(15)}`;
}

/**
 * Makes this copy of @langchain/core (its AsyncLocalStorageProviderSingleton) give untraced calls
 * a copied tree. True once installed (or already); false, leaving LangChain as it is, when the
 * singleton or the tree it makes is not of the shape this was written for (another version).
 */
export function installUntracedRunTrees(singleton: unknown): boolean {
  if (!isProvider(singleton)) return false;
  if (installed.has(singleton)) return true;
  const original = singleton.runWithConfig;
  const probe = {};
  // outside any store, so the template carries no context variables of a caller
  const template = singleton.getInstance().run(undefined, () => original.call(singleton, probe, () => singleton.getInstance().getStore(), false));
  if (!isRootTree(template, probe) || Object.prototype.hasOwnProperty.call(template, CONTEXT_VARIABLES)) return false;
  const proto = Object.getPrototypeOf(template) as object;

  const fresh = (config: unknown, contextVariables: unknown): RunTreeFields => {
    // a spread copy keeps fast properties (Object.assign onto Object.create(proto) made 33-key dictionaries)
    const tree = Object.setPrototypeOf({ ...template }, proto) as RunTreeFields;
    const ms = Date.now();
    const started = stamp(ms);
    tree.start_time = ms;
    tree._serialized_start_time = started;
    tree.id = tree.trace_id = uuid7(ms);
    tree.dotted_order = `${started.replace(/[-:.]/g, "")}${tree.id}`;
    tree.child_runs = [];
    tree.serialized = {};
    tree.inputs = {};
    tree.caller_options = {};
    tree.extra = { ...template.extra, metadata: {}, [CHILD_CONFIG]: config };
    if (contextVariables !== undefined) tree[CONTEXT_VARIABLES] = contextVariables;
    return tree;
  };

  singleton.runWithConfig = function (this: ProviderSingleton, config, callback, avoidCreatingRootRunTree) {
    if (avoidCreatingRootRunTree) return original.call(this, config, callback, true);
    // LangChain's own call without its root tree: a tracer's tree (tracing on) is kept as it is;
    // otherwise the store holds nothing or only the caller's context variables, and ours goes in
    return original.call(
      this,
      config,
      () => {
        const storage = this.getInstance();
        const store = storage.getStore() as RunTreeFields | undefined;
        if (store?.extra?.[CHILD_CONFIG] === config) return callback();
        return storage.run(fresh(config, store?.[CONTEXT_VARIABLES]), callback);
      },
      true,
    );
  };
  installed.add(singleton);
  return true;
}
