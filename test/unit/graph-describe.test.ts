// describeGraph over a real GraphRegistry (in-process, real graph files under fixtures/describe):
// drawable graph JSON, the schemas a loaded graph gives (runtime: zod, StateSchema; channels) and
// subgraph listing with namespaces, recursion and namespace filters.
import path from "node:path";
import { fileURLToPath } from "node:url";
import { MemorySaver } from "@langchain/langgraph";
import { describe, expect, it } from "vitest";
import { describeGraph } from "../../src/actors/graph-describe.ts";
import { GraphRegistry } from "../../src/actors/graph-registry.ts";
import type { AssistantRecord, Json, JsonObject } from "../../src/storage/records.ts";

const DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), "../fixtures/describe");
const DRAFT_07 = "http://json-schema.org/draft-07/schema#";

const registry = new GraphRegistry(
  [
    { graphId: "annotation", filePath: path.join(DIR, "annotation.ts"), exportName: "graph" },
    { graphId: "zod", filePath: path.join(DIR, "zod_state.ts"), exportName: "graph" },
    { graphId: "state_schema", filePath: path.join(DIR, "zod_state.ts"), exportName: "stateSchemaGraph" },
    { graphId: "nested", filePath: path.join(DIR, "nested.ts"), exportName: "graph" },
    { graphId: "factory", filePath: path.join(DIR, "factory.ts"), exportName: "graph" },
    { graphId: "functional", filePath: path.join(DIR, "functional.ts"), exportName: "graph" },
  ],
  { checkpointer: () => new MemorySaver(), store: undefined },
);

function assistant(graphId: string, config: AssistantRecord["config"] = {}): AssistantRecord {
  const now = new Date().toISOString();
  return {
    assistant_id: `a-${graphId}`,
    version: 1,
    config,
    context: null,
    created_at: now,
    updated_at: now,
    graph_id: graphId,
    metadata: {},
    name: graphId,
    description: null,
  };
}

interface Opts {
  xray?: boolean | number;
  namespace?: string;
  recurse?: boolean;
  config?: AssistantRecord["config"];
}

async function run(graphId: string, what: "graph" | "schemas" | "subgraphs", o: Opts = {}): Promise<JsonObject> {
  const out = await describeGraph(registry, {
    type: "graph.describe",
    assistant: assistant(graphId, o.config),
    what,
    xray: o.xray ?? false,
    namespace: o.namespace,
    recurse: o.recurse ?? false,
  });
  // the reply crosses a thread boundary as JSON: it must survive a round trip unchanged
  expect(JSON.parse(JSON.stringify(out))).toEqual(out);
  expect(out).not.toBeNull();
  expect(typeof out).toBe("object");
  return out as JsonObject;
}

const ids = (g: JsonObject) => (g.nodes as JsonObject[]).map((n) => n.id);
const edges = (g: JsonObject) => (g.edges as JsonObject[]).map((e) => `${String(e.source)}->${String(e.target)}${e.conditional ? "?" : ""}`);
const props = (schema: Json | undefined) => Object.keys(((schema as JsonObject).properties as JsonObject) ?? {}).sort();
const prop = (schema: Json | undefined, key: string) => ((schema as JsonObject).properties as JsonObject)[key] as JsonObject;

describe("graph", () => {
  it("lists nodes with start/end schema nodes and plain, conditional edges", async () => {
    const g = await run("annotation", "graph");
    expect(ids(g)).toEqual(["__start__", "draft", "review", "__end__"]);
    const nodes = g.nodes as JsonObject[];
    expect(nodes[0].type).toBe("schema");
    expect(nodes[1]).toMatchObject({ type: "runnable", data: { name: "draft" } });
    expect(edges(g).sort()).toEqual(["__start__->draft", "draft->__end__?", "draft->review?", "review->__end__"].sort());
    for (const e of g.edges as JsonObject[]) expect(typeof e.conditional).toBe("boolean");
  });

  it("expands subgraphs with xray, limited by a numeric depth", async () => {
    const flat = await run("nested", "graph");
    expect(ids(flat)).toEqual(["__start__", "before", "parent", "after", "__end__"]);
    const full = await run("nested", "graph", { xray: true });
    expect(ids(full)).toEqual(["__start__", "before", "parent:p_one", "parent:child:c_one", "parent:child:c_two", "after", "__end__"]);
    expect(edges(full)).toContain("parent:child:c_one->parent:child:c_two");
    const one = await run("nested", "graph", { xray: 1 });
    expect(ids(one)).toEqual(["__start__", "before", "parent:p_one", "parent:child", "after", "__end__"]);
  });

  it("calls a factory with the assistant config and the assistants.read access context", async () => {
    const g = await run("factory", "graph", { config: { configurable: { node_name: "from_config" } } });
    expect(ids(g)).toEqual(["__start__", "from_config", "__end__"]);
    expect((g.nodes as JsonObject[])[1].metadata).toEqual({ access_context: "assistants.read" });
    expect(ids(await run("factory", "graph"))).toContain("fallback");
  });

  it("rejects an unknown graph with GRAPH_NOT_FOUND", async () => {
    await expect(run("nope", "graph")).rejects.toMatchObject({ code: "GRAPH_NOT_FOUND" });
  });
});

describe("schemas", () => {
  it("has no runtime schemas for Annotation graphs (their TypeScript types decide), and channel schemas typing the messages channel", async () => {
    const s = await run("annotation", "schemas");
    expect(s.runtime).toBeNull();
    const c = s.channels as JsonObject;
    expect(props(c.state_schema)).toEqual(["attempts", "messages", "summary"]);
    expect(props(c.input_schema)).toEqual(["messages"]);
    expect(props(c.output_schema)).toEqual(["attempts", "summary"]);
    expect(prop(c.state_schema, "messages")).toEqual({ type: "array", items: { type: "object" }, langgraph_type: "messages" });
    expect(prop(c.state_schema, "summary")).toEqual({});
    expect((c.state_schema as JsonObject).$schema).toBe(DRAFT_07);
    expect((c.state_schema as JsonObject).type).toBe("object");
    expect(c.config_schema).toBeNull();
    expect(c.context_schema).toBeNull();
  });

  it("converts zod state (z.custom messages included) and the zod context schema", async () => {
    const s = (await run("zod", "schemas")).runtime as JsonObject;
    expect(props(s.state_schema)).toEqual(["messages", "score", "topic"]);
    expect(prop(s.state_schema, "topic")).toEqual({ type: "string" });
    expect(prop(s.state_schema, "messages")).toMatchObject({ langgraph_type: "messages" });
    expect((s.state_schema as JsonObject).required).toBeUndefined(); // update type: all optional
    expect((s.output_schema as JsonObject).required).toEqual(["messages", "topic"]);
    expect((s.state_schema as JsonObject).$schema).toBe(DRAFT_07);
    expect(props(s.config_schema)).toEqual(["model_name", "temperature"]);
    expect(prop(s.config_schema, "model_name")).toEqual({ type: "string" });
    expect(s.context_schema).toEqual(s.config_schema);
  });

  it("uses StateSchema's own JSON schema", async () => {
    const s = (await run("state_schema", "schemas")).runtime as JsonObject;
    expect(props(s.state_schema)).toEqual(["count", "label", "messages"]);
    expect(prop(s.state_schema, "messages")).toMatchObject({ langgraph_type: "messages" });
    expect(prop(s.state_schema, "count")).toMatchObject({ type: "number", default: 0 });
    expect((s.output_schema as JsonObject).required).toEqual(["label"]);
    expect(s.config_schema).toBeNull();
  });

  it("says nothing for a graph it cannot describe", async () => {
    const none = { input_schema: null, output_schema: null, state_schema: null, config_schema: null, context_schema: null };
    expect(await run("functional", "schemas")).toEqual({ runtime: null, channels: none });
  });
});

describe("subgraphs", () => {
  it("lists direct subgraphs, or all of them with recurse, each with its own schemas", async () => {
    const direct = await run("nested", "subgraphs");
    expect(Object.keys(direct)).toEqual(["parent"]);
    const all = await run("nested", "subgraphs", { recurse: true });
    expect(Object.keys(all)).toEqual(["parent", "parent|child"]);
    const parent = all.parent as JsonObject;
    expect(Object.keys(parent).sort()).toEqual(["channels", "runtime"]);
    expect(props((parent.channels as JsonObject).state_schema)).toEqual(["parent_only", "shared"]);
    expect(props(((all["parent|child"] as JsonObject).channels as JsonObject).state_schema)).toEqual(["child_only", "shared"]);
  });

  it("selects one subgraph by namespace", async () => {
    expect(Object.keys(await run("nested", "subgraphs", { namespace: "parent|child", recurse: true }))).toEqual(["parent|child"]);
    expect(Object.keys(await run("nested", "subgraphs", { namespace: "parent", recurse: true }))).toEqual(["parent"]);
    expect(await run("nested", "subgraphs", { namespace: "missing", recurse: true })).toEqual({});
  });

  it("is empty for graphs without subgraphs", async () => {
    expect(await run("annotation", "subgraphs", { recurse: true })).toEqual({});
    expect(await run("functional", "subgraphs")).toEqual({});
  });
});
