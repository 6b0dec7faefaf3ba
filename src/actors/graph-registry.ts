// Loads user graphs inside an actor worker. A graph file may live in the user's own project with
// its own copies of @langchain/langgraph and @langchain/core, so the library objects the runtime
// hands to a graph (Command, Send, the checkpoint serializer) are taken from the copy that graph
// imports, not from ours. TypeScript files were compiled by the main thread (src/loader/).
import { existsSync, readFileSync, realpathSync } from "node:fs";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import * as ourSingletons from "@langchain/core/singletons";
import * as ourLangGraph from "@langchain/langgraph";
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";
import { TroupeError, graphNotFound } from "../errors.ts";
import { importUserModule } from "../loader/user-modules.ts";
import { installUntracedRunTrees } from "./untraced-run-trees.ts";
import type { GraphSpecLite } from "../bridge/messages.ts";

/** The subset of a compiled LangGraph graph the runtime uses (structural, works across copies). */
export interface CompiledGraphLike {
  checkpointer?: unknown;
  store?: unknown;
  stream(input: unknown, options: Record<string, unknown>): Promise<AsyncIterable<unknown>>;
  streamEvents(input: unknown, options: Record<string, unknown>): AsyncIterable<StreamEventLike>;
  getState(config: Record<string, unknown>, options?: Record<string, unknown>): Promise<StateSnapshotLike>;
  getStateHistory(config: Record<string, unknown>, options?: Record<string, unknown>): AsyncIterable<StateSnapshotLike>;
  updateState(config: Record<string, unknown>, values: unknown, asNode?: string): Promise<Record<string, unknown>>;
  bulkUpdateState?(config: Record<string, unknown>, supersteps: unknown[]): Promise<Record<string, unknown>>;
  getGraphAsync?(config?: Record<string, unknown>): Promise<DrawableGraphLike>;
  getGraph?(config?: Record<string, unknown>): DrawableGraphLike;
  getSubgraphsAsync?(namespace?: string, recurse?: boolean): AsyncIterable<[string, CompiledGraphLike]>;
  builder?: unknown;
  nodes?: Record<string, unknown>;
}

export interface StreamEventLike {
  event: string;
  name: string;
  run_id: string;
  tags?: string[];
  metadata: Record<string, unknown>;
  data: Record<string, unknown>;
  parent_ids?: string[];
}

export interface StateSnapshotLike {
  values: unknown;
  next: string[];
  tasks: { id: string; name: string; error?: unknown; interrupts?: { id?: string; value?: unknown }[]; path?: unknown[]; state?: unknown; result?: unknown }[];
  metadata?: Record<string, unknown>;
  config: { configurable?: Record<string, unknown> };
  parentConfig?: { configurable?: Record<string, unknown> };
  createdAt?: string;
}

export interface DrawableGraphLike {
  toJSON(): unknown;
}

export interface LangGraphLib {
  Command: new (args: Record<string, unknown>) => unknown;
  Send: new (node: string, args: unknown) => unknown;
}

type Factory = (config: Record<string, unknown>, extra?: Record<string, unknown>) => unknown;

interface LoadedGraph {
  spec: GraphSpecLite;
  /** compiled graph, or a factory producing one per call */
  graph?: CompiledGraphLike;
  factory?: Factory;
  lib: LangGraphLib;
  serde?: SerializerProtocol;
  /** the checkpoint library copy the serde came from: graphs sharing it share one saver (and its cache) */
  serdeSource?: object;
}

export interface GraphAttachments {
  /** builds the checkpointer for a graph, given that graph's serializer (undefined = ours) */
  checkpointer(serde: SerializerProtocol | undefined): unknown;
  store: unknown;
}

export class GraphRegistry {
  private readonly specs = new Map<string, GraphSpecLite>();
  private readonly loaded = new Map<string, Promise<LoadedGraph>>();

  constructor(
    specs: GraphSpecLite[],
    private readonly attach: GraphAttachments,
  ) {
    for (const s of specs) this.specs.set(s.graphId, s);
  }

  has(graphId: string): boolean {
    return this.specs.has(graphId);
  }

  /** library objects (Command, Send) of the copy of LangGraph the graph uses */
  async lib(graphId: string): Promise<LangGraphLib> {
    return (await this.load(graphId)).lib;
  }

  /**
   * A compiled graph with our checkpointer and store attached. Factories are called with the
   * config of the operation (run config, thread config or assistant config), as upstream does.
   */
  async get(graphId: string, config: Record<string, unknown>, opts: { checkpointer?: boolean; accessContext?: string } = {}): Promise<CompiledGraphLike> {
    const g = await this.load(graphId);
    let graph = g.graph;
    if (g.factory) {
      graph = await toCompiled(await g.factory(config, { accessContext: opts.accessContext ?? "threads.create_run", executionRuntime: null }), g.spec);
    }
    if (!graph) throw new TroupeError("GRAPH_LOAD_FAILED", `Graph "${graphId}" did not produce a compiled graph`);
    if (opts.checkpointer === false) {
      // stateless runs without persistence: a shallow clone so the shared instance keeps its saver
      const clone = Object.create(graph) as CompiledGraphLike;
      clone.checkpointer = undefined;
      clone.store = this.attach.store;
      return clone;
    }
    graph.checkpointer = this.saverFor(g);
    graph.store = this.attach.store;
    return graph;
  }

  private savers = new Map<object | string, unknown>();
  private saverFor(g: LoadedGraph): unknown {
    const key = g.serdeSource ?? "ours";
    let s = this.savers.get(key);
    if (!s) this.savers.set(key, (s = this.attach.checkpointer(g.serde)));
    return s;
  }

  private load(graphId: string): Promise<LoadedGraph> {
    let p = this.loaded.get(graphId);
    if (!p) {
      const spec = this.specs.get(graphId);
      if (!spec) return Promise.reject(graphNotFound(graphId));
      p = loadGraph(spec);
      this.loaded.set(graphId, p);
      p.catch(() => this.loaded.delete(graphId));
    }
    return p;
  }
}

async function loadGraph(spec: GraphSpecLite): Promise<LoadedGraph> {
  let mod: Record<string, unknown>;
  try {
    mod = await importUserModule(spec.filePath);
  } catch (err) {
    throw new TroupeError("GRAPH_LOAD_FAILED", `Failed to load graph "${spec.graphId}" from ${spec.filePath}: ${(err as Error).message}`, { cause: err });
  }
  if (!(spec.exportName in mod)) {
    throw new TroupeError("GRAPH_LOAD_FAILED", `Graph "${spec.graphId}": ${spec.filePath} has no export "${spec.exportName}"`);
  }
  const exported = await mod[spec.exportName];
  const dir = dirname(spec.filePath);
  const langgraphDir = packageDir(dir, "@langchain/langgraph");
  const lib =
    ((langgraphDir === undefined ? undefined : await importPackage(langgraphDir)) as unknown as LangGraphLib | undefined) ??
    (ourLangGraph as unknown as LangGraphLib);
  await untracedRunTreesFor(langgraphDir);
  const ckpt = (await importFrom(dir, "@langchain/langgraph-checkpoint")) as { JsonPlusSerializer?: new () => SerializerProtocol } | undefined;
  const serde = ckpt?.JsonPlusSerializer ? new ckpt.JsonPlusSerializer() : undefined;
  const serdeSource = ckpt?.JsonPlusSerializer ? (ckpt.JsonPlusSerializer as object) : undefined;
  if (typeof exported === "function" && !isGraphLike(exported)) {
    return { spec, factory: exported as Factory, lib, serde, serdeSource };
  }
  return { spec, graph: await toCompiled(exported, spec), lib, serde, serdeSource };
}

/**
 * The copy of @langchain/core that the graph's LangGraph runs its calls with gives untraced calls a
 * copied run tree (untraced-run-trees.ts): the copy next to the graph's LangGraph, else ours.
 */
async function untracedRunTreesFor(langgraphDir: string | undefined): Promise<void> {
  try {
    // from its real path: a linked install (pnpm) keeps its dependencies beside the real one
    const singletons = langgraphDir === undefined ? ourSingletons : await importFrom(realpathSync(langgraphDir), "@langchain/core", "./singletons");
    installUntracedRunTrees(singletons?.AsyncLocalStorageProviderSingleton);
  } catch {
    // a copy we cannot reach runs as LangChain made it: a shortcut never fails a graph's load
  }
}

function isGraphLike(v: unknown): boolean {
  return typeof v === "object" && v !== null && ("invoke" in v || "compile" in v);
}

async function toCompiled(value: unknown, spec: GraphSpecLite): Promise<CompiledGraphLike> {
  let v = await value;
  if (v && typeof v === "object" && "graph" in v && !("getState" in v)) v = (v as { graph: unknown }).graph; // createAgent wrapper
  if (v && typeof v === "object" && "compile" in v && typeof (v as { compile: unknown }).compile === "function" && !("getState" in v)) {
    v = (v as { compile: () => unknown }).compile();
  }
  if (!v || typeof v !== "object" || typeof (v as { stream?: unknown }).stream !== "function" || typeof (v as { getState?: unknown }).getState !== "function") {
    throw new TroupeError(
      "GRAPH_LOAD_FAILED",
      `Graph "${spec.graphId}" (${spec.filePath}:${spec.exportName}) is not a LangGraph graph, StateGraph or graph factory`,
    );
  }
  return v as CompiledGraphLike;
}

/** The directory of `pkg` as code in `fromDir` would find it (walking up node_modules); undefined when not installed there. */
function packageDir(fromDir: string, pkg: string): string | undefined {
  let dir = fromDir;
  for (;;) {
    const pkgDir = join(dir, "node_modules", pkg);
    if (existsSync(join(pkgDir, "package.json"))) return pkgDir;
    const parent = dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}

/** Import a package's entry (`subpath`: "." or e.g. "./singletons") as ESM code would ("import" condition). */
async function importPackage(pkgDir: string, subpath = "."): Promise<Record<string, unknown> | undefined> {
  const entry = esmEntry(JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8")) as PackageJson, subpath);
  return entry === undefined ? undefined : ((await import(pathToFileURL(join(pkgDir, entry)).href)) as Record<string, unknown>);
}

/** importPackage of `pkg` as code in `fromDir` would find it; undefined when it is not installed there. */
async function importFrom(fromDir: string, pkg: string, subpath = "."): Promise<Record<string, unknown> | undefined> {
  const pkgDir = packageDir(fromDir, pkg);
  return pkgDir === undefined ? undefined : importPackage(pkgDir, subpath);
}

interface PackageJson {
  main?: string;
  module?: string;
  exports?: unknown;
}

function esmEntry(pj: PackageJson, subpath: string): string | undefined {
  const exports = typeof pj.exports === "object" && pj.exports !== null ? (pj.exports as Record<string, unknown>) : undefined;
  const target = exports !== undefined && Object.keys(exports).some((k) => k.startsWith(".")) ? exports[subpath] : subpath === "." ? pj.exports : undefined;
  const pick = (e: unknown): string | undefined => {
    if (typeof e === "string") return e;
    if (e && typeof e === "object") {
      const o = e as Record<string, unknown>;
      return pick(o.import) ?? pick(o.node) ?? pick(o.default);
    }
    return undefined;
  };
  return pick(target) ?? (subpath === "." ? (pj.module ?? pj.main) : undefined);
}
