// Answers GET /assistants/{id}/graph, /schemas and /subgraphs inside an actor worker: loads the
// assistant's graph and describes it as plain JSON (drawable graph, JSON schemas, subgraphs). The
// schemas it can read off the loaded graph are of two grades: `runtime` (zod, StateSchema: what
// the JS server answers when the graph has them) and `channels` (names, messages lists: the last
// resort). The HTTP thread puts them together with the ones the graph file's TypeScript types
// give (src/api/graph-schemas.ts).
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import * as ourLangGraph from "@langchain/langgraph";
import * as ourZodSchema from "@langchain/langgraph/zod/schema";
import * as ourJsonSchema from "@langchain/core/utils/json_schema";
import { TroupeError } from "../errors.ts";
import type { Json, JsonObject } from "../storage/records.ts";
import type { CompiledGraphLike, DrawableGraphLike, GraphRegistry } from "./graph-registry.ts";
import type { DescribedSchemas, GraphSchemas, GraphSpecLite, ShardCommand } from "../bridge/messages.ts";

type DescribeCommand = Extract<ShardCommand, { type: "graph.describe" }>;

const JSON_SCHEMA_DRAFT_07 = "http://json-schema.org/draft-07/schema#";

export async function describeGraph(registry: GraphRegistry, cmd: DescribeCommand): Promise<Json> {
  const graphId = cmd.assistant.graph_id;
  const graph = await registry.get(graphId, cmd.assistant.config as Record<string, unknown>, { accessContext: "assistants.read" });
  if (cmd.what === "graph") return drawGraph(graph, cmd.xray);
  const tools = await schemaTools(registry, graphId);
  if (cmd.what === "schemas") return describedSchemas(graph, tools) as unknown as Json;
  const out: JsonObject = {};
  for await (const [namespace, subgraph] of subgraphsOf(graph, cmd.namespace, cmd.recurse)) {
    out[namespace] = describedSchemas(subgraph, tools) as unknown as Json;
  }
  return out;
}

// ---- /graph -------------------------------------------------------------------------------

async function drawGraph(graph: CompiledGraphLike, xray: boolean | number): Promise<JsonObject> {
  const config = { xray };
  let drawable: DrawableGraphLike | undefined;
  if (typeof graph.getGraphAsync === "function") drawable = await graph.getGraphAsync(config);
  else if (typeof graph.getGraph === "function") drawable = graph.getGraph(config);
  if (!drawable) throw new TroupeError("NOT_IMPLEMENTED", "This graph cannot be drawn");
  const raw = toPlainJson(drawable.toJSON());
  const nodes = isObject(raw) && Array.isArray(raw.nodes) ? raw.nodes : [];
  const edges = isObject(raw) && Array.isArray(raw.edges) ? raw.edges : [];
  return {
    nodes,
    edges: edges
      .filter((e): e is JsonObject => isObject(e))
      .map((e) => {
        const edge: JsonObject = { source: e.source ?? null, target: e.target ?? null, conditional: e.conditional === true };
        if (e.data !== undefined && e.data !== null) edge.data = e.data;
        return edge;
      }),
  };
}

// ---- /subgraphs ---------------------------------------------------------------------------

type SubgraphIterable = AsyncIterable<[string, unknown]> | Iterable<[string, unknown]>;

async function* subgraphsOf(graph: CompiledGraphLike, namespace: string | undefined, recurse: boolean): AsyncGenerator<[string, unknown]> {
  const g = graph as CompiledGraphLike & { getSubgraphs?(namespace?: string, recurse?: boolean): Iterable<[string, unknown]> };
  let it: SubgraphIterable | undefined;
  if (typeof g.getSubgraphsAsync === "function") it = g.getSubgraphsAsync(namespace, recurse);
  else if (typeof g.getSubgraphs === "function") it = g.getSubgraphs(namespace, recurse);
  if (!it) return;
  for await (const entry of it) yield entry;
}

// ---- /schemas -----------------------------------------------------------------------------

/** LangGraph's runtime schema getters (`@langchain/langgraph/zod/schema`); each may throw. */
interface ZodSchemaModule {
  getUpdateTypeSchema(graph: unknown, registry?: unknown): unknown;
  getInputTypeSchema(graph: unknown, registry?: unknown): unknown;
  getOutputTypeSchema(graph: unknown, registry?: unknown): unknown;
  getConfigTypeSchema(graph: unknown, registry?: unknown): unknown;
}

interface SchemaTools {
  zod: ZodSchemaModule;
  /** `toJsonSchema` of @langchain/core (zod v3 and v4 aware, takes zod's toJSONSchema params) */
  toJsonSchema(schema: unknown, params?: Record<string, unknown>): unknown;
  /** reducer functions that mark a channel as a messages list */
  messageReducers: Set<unknown>;
}

/** StateGraph builder internals (node_modules/@langchain/langgraph/dist/graph/state.js). */
interface BuilderLike {
  channels?: Record<string, unknown>;
  _schemaDefinition?: unknown;
  _inputDefinition?: unknown;
  _outputDefinition?: unknown;
  _schemaRuntimeDefinition?: unknown;
  _inputRuntimeDefinition?: unknown;
  _outputRuntimeDefinition?: unknown;
  _configRuntimeSchema?: unknown;
  _metaRegistry?: { getExtendedChannelSchemas?(schema: unknown, effects: Record<string, boolean>): unknown };
}

type Kind = "state" | "input" | "output" | "config";

const MESSAGE_REDUCER_NAMES = new Set(["messagesStateReducer", "messagesDeltaReducer"]);

/**
 * Upstream order: StateSchema / zod getters first, then a lenient zod conversion (`runtime`); the
 * channels apart. As in the JS server, `state_schema` is the graph's *update* type (what
 * updateState accepts).
 */
function describedSchemas(graph: unknown, tools: SchemaTools): DescribedSchemas {
  const builder = isObject(graph) && isObject(graph.builder) ? (graph.builder as BuilderLike) : undefined;
  const runtime = (kind: Kind) => (builder ? runtimeSchema(graph, builder, kind, tools) : null);
  const channels = (kind: Exclude<Kind, "config">) => (builder ? channelSchema(builder, kind, tools) : null);
  const fromRuntime = schemaSet(runtime("input"), runtime("output"), runtime("state"), runtime("config"));
  const saysAnything = Object.values(fromRuntime).some((v) => v !== null);
  return { runtime: saysAnything ? fromRuntime : null, channels: schemaSet(channels("input"), channels("output"), channels("state"), null) };
}

function schemaSet(input: JsonObject | null, output: JsonObject | null, state: JsonObject | null, config: JsonObject | null): GraphSchemas {
  return { input_schema: input, output_schema: output, state_schema: state, config_schema: config, context_schema: config };
}

function runtimeSchema(graph: unknown, builder: BuilderLike, kind: Kind, tools: SchemaTools): JsonObject | null {
  const getter = {
    state: tools.zod.getUpdateTypeSchema,
    input: tools.zod.getInputTypeSchema,
    output: tools.zod.getOutputTypeSchema,
    config: tools.zod.getConfigTypeSchema,
  }[kind];
  const fromLangGraph = attempt(() => (builder._metaRegistry ? getter(graph, builder._metaRegistry) : getter(graph)));
  if (isObject(fromLangGraph)) return finish(fromLangGraph);
  const lenient = attempt(() => lenientZodSchema(builder, kind, tools));
  return isObject(lenient) ? finish(lenient) : null;
}

/** The zod path again, converting what JSON Schema cannot express (z.custom) to `{}` instead of throwing. */
function lenientZodSchema(builder: BuilderLike, kind: Kind, tools: SchemaTools): unknown {
  const partial = { withReducerSchema: true, withJsonSchemaExtrasAsDescription: true, asPartial: true };
  const plain = { withJsonSchemaExtrasAsDescription: true };
  let def: unknown;
  let effects: Record<string, boolean> = plain;
  if (kind === "state") [def, effects] = [builder._schemaRuntimeDefinition, partial];
  else if (kind === "input") {
    def = typeof builder._inputRuntimeDefinition === "symbol" ? builder._schemaRuntimeDefinition : builder._inputRuntimeDefinition;
    effects = partial;
  } else if (kind === "output") def = builder._outputRuntimeDefinition;
  else def = builder._configRuntimeSchema;
  if (!isObject(def) || !builder._metaRegistry?.getExtendedChannelSchemas) return undefined;
  const extended = builder._metaRegistry.getExtendedChannelSchemas(def, effects);
  return extrasFromDescriptions(tools.toJsonSchema(extended, { target: "draft-07", unrepresentable: "any" }));
}

/** LangGraph smuggles `jsonSchemaExtra` through zod as a description `lg:{...json}`. */
function extrasFromDescriptions(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(extrasFromDescriptions);
  if (!isObject(schema)) return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) out[k] = extrasFromDescriptions(v);
  if (typeof out.description === "string" && out.description.startsWith("lg:")) {
    const extras = attempt(() => JSON.parse((out.description as string).slice(3)) as unknown);
    delete out.description;
    if (isObject(extras)) Object.assign(out, extras);
  }
  return out;
}

/** Best effort for Annotation graphs: channel names, with messages channels typed as lists. */
function channelSchema(builder: BuilderLike, kind: Exclude<Kind, "config">, tools: SchemaTools): JsonObject | null {
  const def = { state: builder._schemaDefinition, input: builder._inputDefinition, output: builder._outputDefinition }[kind];
  if (!isObject(def)) return null;
  const properties: JsonObject = {};
  for (const key of Object.keys(def)) {
    const channel = builder.channels?.[key] ?? def[key];
    properties[key] = isMessagesChannel(channel, tools) ? { type: "array", items: { type: "object" }, langgraph_type: "messages" } : {};
  }
  return { $schema: JSON_SCHEMA_DRAFT_07, type: "object", properties };
}

function isMessagesChannel(channel: unknown, tools: SchemaTools): boolean {
  if (!isObject(channel)) return false;
  const reducer = channel.operator ?? channel.reducer;
  if (typeof reducer !== "function") return false;
  return tools.messageReducers.has(reducer) || MESSAGE_REDUCER_NAMES.has(reducer.name);
}

function finish(schema: Record<string, unknown>): JsonObject | null {
  const json = toPlainJson(schema);
  if (!isObject(json)) return null;
  return "$schema" in json ? json : { $schema: JSON_SCHEMA_DRAFT_07, ...json };
}

// ---- the graph's own copy of LangGraph ----------------------------------------------------

const toolsByDir = new Map<string, Promise<SchemaTools>>();

async function schemaTools(registry: GraphRegistry, graphId: string): Promise<SchemaTools> {
  const dir = graphDir(registry, graphId);
  const key = dir ?? "";
  let p = toolsByDir.get(key);
  if (!p) {
    p = loadTools(registry, graphId, dir);
    toolsByDir.set(key, p);
    p.catch(() => toolsByDir.delete(key));
  }
  return p;
}

async function loadTools(registry: GraphRegistry, graphId: string, dir: string | undefined): Promise<SchemaTools> {
  const theirs = dir ? await attemptAsync(() => importFrom(dir, "@langchain/langgraph", "./zod/schema")) : undefined;
  const zod = isZodSchemaModule(theirs) ? theirs : (ourZodSchema as unknown as ZodSchemaModule);
  const core = dir ? await attemptAsync(() => importFrom(dir, "@langchain/core", "./utils/json_schema")) : undefined;
  const toJsonSchema =
    isObject(core) && typeof core.toJsonSchema === "function"
      ? (core.toJsonSchema as SchemaTools["toJsonSchema"])
      : (ourJsonSchema.toJsonSchema as unknown as SchemaTools["toJsonSchema"]);
  const lib = (await attemptAsync(() => registry.lib(graphId))) as Record<string, unknown> | undefined;
  const messageReducers = new Set<unknown>([ourLangGraph.messagesStateReducer, ourLangGraph.messagesDeltaReducer]);
  for (const name of MESSAGE_REDUCER_NAMES) if (typeof lib?.[name] === "function") messageReducers.add(lib[name]);
  return { zod, toJsonSchema, messageReducers };
}

function isZodSchemaModule(m: unknown): m is ZodSchemaModule {
  return isObject(m) && ["getUpdateTypeSchema", "getInputTypeSchema", "getOutputTypeSchema", "getConfigTypeSchema"].every((k) => typeof m[k] === "function");
}

/**
 * Directory of the graph file. GraphRegistry keeps its specs private; read them structurally
 * and fall back to our own LangGraph copy when the shape is not there.
 */
function graphDir(registry: GraphRegistry, graphId: string): string | undefined {
  const specs = (registry as unknown as { specs?: unknown }).specs;
  if (!(specs instanceof Map)) return undefined;
  const spec = specs.get(graphId) as GraphSpecLite | undefined;
  return typeof spec?.filePath === "string" ? dirname(spec.filePath) : undefined;
}

/** Import `pkg/subpath` as the graph's directory would see it (ESM "import" condition). */
async function importFrom(fromDir: string, pkg: string, subpath: string): Promise<unknown> {
  for (let dir = fromDir; ; dir = dirname(dir)) {
    const pkgDir = join(dir, "node_modules", pkg);
    const pj = join(pkgDir, "package.json");
    if (existsSync(pj)) {
      const exportsField = (JSON.parse(readFileSync(pj, "utf8")) as { exports?: unknown }).exports;
      const entry = isObject(exportsField) ? importEntry(exportsField[subpath]) : undefined;
      return entry ? await import(pathToFileURL(join(pkgDir, entry)).href) : undefined;
    }
    if (dirname(dir) === dir) return undefined;
  }
}

function importEntry(e: unknown): string | undefined {
  if (typeof e === "string") return e;
  if (!isObject(e)) return undefined;
  return importEntry(e.import) ?? importEntry(e.node) ?? importEntry(e.default);
}

// ---- plain JSON ---------------------------------------------------------------------------

/** JSON.stringify semantics (toJSON, undefined dropped), plus cycles and bigints made safe. */
function toPlainJson(value: unknown, seen: Set<object> = new Set()): Json | undefined {
  if (value === null) return null;
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      return Number.isFinite(value) ? value : null;
    case "bigint":
      return value.toString();
    case "object":
      break;
    default:
      return undefined;
  }
  const obj = value as object;
  if (seen.has(obj)) return undefined;
  if (typeof (obj as { toJSON?: unknown }).toJSON === "function") {
    const replaced: unknown = (obj as { toJSON(): unknown }).toJSON();
    if (replaced !== obj) return toPlainJson(replaced, seen);
  }
  seen.add(obj);
  try {
    if (Array.isArray(obj)) return obj.map((v) => toPlainJson(v, seen) ?? null);
    const out: JsonObject = {};
    for (const [k, v] of Object.entries(obj)) {
      const j = toPlainJson(v, seen);
      if (j !== undefined) out[k] = j;
    }
    return out;
  } finally {
    seen.delete(obj);
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function attempt<T>(fn: () => T): T | undefined {
  try {
    return fn();
  } catch {
    return undefined;
  }
}

async function attemptAsync<T>(fn: () => Promise<T>): Promise<T | undefined> {
  try {
    return await fn();
  } catch {
    return undefined;
  }
}
