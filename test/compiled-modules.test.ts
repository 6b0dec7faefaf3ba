// Workers import user graph files compiled by the main thread (src/loader/), not through tsx.
// Through a real server and the SDK: sources keep their own import.meta.url, a local module two
// graph files import is one instance, .tsx entries work, function names survive bundling, and a
// file that does not compile fails only its own runs, with esbuild's message.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import { REPO, startTestServer, type TestServer } from "./helpers/server.ts";
import { compileModules } from "../src/loader/compile-modules.ts";

const CONFIG = join(REPO, "test/fixtures/compiled/service.json");

describe("compiled user modules", () => {
  let server: TestServer;
  let client: Client;

  beforeAll(async () => {
    server = await startTestServer({ config: CONFIG, workers: 1 });
    client = new Client({ apiUrl: server.url, apiKey: null });
  });
  afterAll(async () => {
    await server?.stop();
    server?.cleanup();
  });

  it("compiles into the data dir; a graph reads a file next to its source", async () => {
    const out = (await client.runs.wait(null, "file_graph", { input: {} })) as Record<string, unknown>;
    expect(out.out).toBe("hello from a file next to the graph");
    expect(out.node).toBe("readGreeting"); // keepNames: LangChain names runnables after functions
    const builds = readdirSync(join(server.dataDir, "modules", "user"));
    expect(builds).toHaveLength(1);
    expect(readdirSync(join(server.dataDir, "modules", "user", builds[0]!)).some((f) => f.endsWith(".mjs.map"))).toBe(true);
  });

  it("two graph files share one instance of a local module they both import", async () => {
    const a = (await client.runs.wait(null, "count_graph", { input: {} })) as { call: number };
    const b = (await client.runs.wait(null, "file_graph", { input: {} })) as { call: number };
    const c = (await client.runs.wait(null, "count_graph", { input: {} })) as { call: number };
    expect(b.call).toBe(a.call + 1);
    expect(c.call).toBe(b.call + 1);
  });

  it("a graph that does not compile fails its runs with the compiler's message; others run", async () => {
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, "broken", { input: {} });
    const done = await client.runs.join(thread.thread_id, run.run_id) as Record<string, unknown>;
    const finished = await client.runs.get(thread.thread_id, run.run_id);
    expect(finished.status).toBe("error");
    expect(JSON.stringify(done)).toMatch(/broken\.ts: it does not compile: .*broken\.ts:2:\d+: /);
    expect(server.output()).toMatch(/broken\.ts does not compile \(its graph's runs will fail\)/);
    const echo = (await client.runs.wait(null, "echo", { input: { messages: [{ role: "human", content: "still here" }] } })) as { messages: { content: string }[] };
    expect(echo.messages.at(-1)?.content).toBe("still here");
  });

  it("reuses an unchanged build and removes older ones", async () => {
    const dir = join(server.dataDir, "modules", "unit");
    const entry = join(REPO, "test/fixtures/compiled/count_graph.tsx");
    const first = await compileModules([entry], dir);
    const second = await compileModules([entry], dir);
    expect(second.urls[entry]).toBe(first.urls[entry]);
    expect(readdirSync(dir)).toHaveLength(1);
    const plain = join(REPO, "bin/troupe.js");
    const mixed = await compileModules([plain], dir); // plain JS is imported as it is
    expect(mixed.urls[plain]).toMatch(/bin\/troupe\.js$/);
    expect(existsSync(new URL(first.urls[entry]!))).toBe(true);
  });
});
