// GET /assistants/{id}/schemas and /subgraphs of a real LangGraph.js project whose state,
// configuration and subgraph are Annotation-typed (test/fixtures/annotation-project, in a temp
// directory with its own node_modules and type declarations): the schemas come from its
// TypeScript types, equal to what the JS dev server's extractor gives, extracted once per build.
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@langchain/langgraph-sdk";
import { getStaticGraphSchema } from "@langchain/langgraph-api/schema";
import { makeUserProject } from "./fixtures/make-user-project.ts";
import { REPO, startTestServer, type TestServer } from "./helpers/server.ts";

const DRAFT_07 = "http://json-schema.org/draft-07/schema#";
const BASE_MESSAGE = "BaseMessage<MessageStructure<MessageToolSet>,MessageType>";
/** the TypeScript checker over LangGraph's types takes a while on a busy 2-core machine */
const SLOW_MS = 300_000;

type Schema = { type?: string; properties?: Record<string, unknown>; definitions?: Record<string, { description?: string }>; $schema?: string };

let project: string;
let dataDir: string;
let server: TestServer;
let client: Client;

async function start(): Promise<void> {
  server = await startTestServer({ config: join(project, "langgraph.json"), dataDir });
  client = new Client({ apiUrl: server.url, apiKey: null });
}

beforeAll(async () => {
  project = mkdtempSync(join(tmpdir(), "troupe-annotation-project-"));
  dataDir = mkdtempSync(join(tmpdir(), "troupe-annotation-data-"));
  await makeUserProject(project, { includeTypes: true });
  cpSync(join(REPO, "test/fixtures/annotation-project"), project, { recursive: true });
  await start();
}, SLOW_MS);

afterAll(async () => {
  await server?.stop();
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(project, { recursive: true, force: true });
});

describe("schemas of an Annotation-typed graph", () => {
  it("are its TypeScript types: state, input, output, configuration (also as context)", { timeout: SLOW_MS }, async () => {
    const s = await client.assistants.getSchemas("agent");
    expect(s.graph_id).toBe("agent");
    const state = s.state_schema as Schema;
    expect(state.$schema).toBe(DRAFT_07);
    expect(state.properties).toEqual({
      messages: { type: "array", items: { $ref: `#/definitions/${BASE_MESSAGE}` } },
      key_one: { type: "string" },
      key_two: { type: "number" },
      tags: { type: "array", items: { type: "string" } },
      mode: { enum: ["fast", "thorough"], type: "string" },
    });
    expect(state.definitions?.[BASE_MESSAGE]?.description).toContain("Base class for all types of messages");
    expect((s.input_schema as Schema).properties).toEqual(state.properties);
    expect((s.output_schema as Schema).properties).toEqual(state.properties);
    expect((s.config_schema as Schema).properties).toEqual({
      model_name: { description: "the chat model to call", type: "string" },
      temperature: { type: "number" },
    });
    expect(s.context_schema).toEqual(s.config_schema);
  });

  it("and the subgraph's are its own types", { timeout: SLOW_MS }, async () => {
    const subgraphs = await client.assistants.getSubgraphs("agent", { recurse: true });
    expect(Object.keys(subgraphs)).toEqual(["research"]);
    const research = subgraphs.research!;
    expect(research.graph_id).toBe("agent");
    expect((research.state_schema as Schema).properties).toEqual({
      key_one: { type: "string" },
      notes: { type: "array", items: { type: "string" } },
      done: { type: "boolean" },
    });
    expect(await client.assistants.getSubgraphs("agent", { namespace: "research" })).toEqual(subgraphs);
  });

  it("equal what the JS dev server's extractor gives for the same file", { timeout: SLOW_MS }, async () => {
    const upstream = await getStaticGraphSchema({ sourceFile: join(project, "graph.ts"), exportSymbol: "graph" }, { mainThread: true });
    expect(Object.keys(upstream).sort()).toEqual(["graph", "graph|research"]);
    const ours = await client.assistants.getSchemas("agent");
    const root = upstream.graph!;
    expect(ours).toEqual({
      graph_id: "agent",
      state_schema: root.state,
      input_schema: root.input,
      output_schema: root.output,
      config_schema: root.config,
      context_schema: root.config,
    });
    const research = (await client.assistants.getSubgraphs("agent")).research!;
    const sub = upstream["graph|research"]!;
    expect(research).toEqual({
      graph_id: "agent",
      state_schema: sub.state,
      input_schema: sub.input,
      output_schema: sub.output,
      config_schema: sub.config,
      context_schema: sub.config,
    });
  });

  it("are kept per build: a restart answers from the kept ones; a changed graph file is read again", { timeout: SLOW_MS }, async () => {
    await server.stop();
    // mark the kept answer: a restart that answers with the mark did not run the checker again
    const cacheDir = join(dataDir, "modules", "schemas");
    const [file] = readdirSync(cacheDir).filter((f) => f.endsWith(".json"));
    const entry = JSON.parse(readFileSync(join(cacheDir, file!), "utf8"));
    entry.schemas.graph.state.properties.key_one = { type: "string", description: "kept" };
    writeFileSync(join(cacheDir, file!), JSON.stringify(entry));
    await start();
    expect(((await client.assistants.getSchemas("agent")).state_schema as Schema).properties?.key_one).toEqual({ type: "string", description: "kept" });

    await server.stop();
    const graphFile = join(project, "graph.ts");
    writeFileSync(
      graphFile,
      readFileSync(graphFile, "utf8").replace("  key_two: Annotation<number>,", "  key_two: Annotation<number>,\n  key_three: Annotation<boolean>,"),
    );
    await start();
    const props = ((await client.assistants.getSchemas("agent")).state_schema as Schema).properties;
    expect(props?.key_one).toEqual({ type: "string" });
    expect(props?.key_three).toEqual({ type: "boolean" });
  });
});
