// Workers import user graph files compiled by the main thread (src/loader/), not through tsx.
// Through a real server and the SDK: sources keep their own import.meta.url, a local module two
// graph files import is one instance, .tsx entries work, function names survive bundling, and a
// file that does not compile fails only its own runs, with esbuild's message.
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
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
    expect(out.where).toBe("compiled:AQID"); // require() of a builtin and of a package, __dirname
    const builds = readdirSync(join(server.dataDir, "modules", "user")).filter((f) => f !== "in-use"); // in-use: which build each process runs
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
    const done = (await client.runs.join(thread.thread_id, run.run_id)) as Record<string, unknown>;
    const finished = await client.runs.get(thread.thread_id, run.run_id);
    expect(finished.status).toBe("error");
    expect(JSON.stringify(done)).toMatch(/broken\.ts: it does not compile: .*broken\.ts:2:\d+: /);
    expect(server.output()).toMatch(/broken\.ts does not compile: /);
    const echo = (await client.runs.wait(null, "echo", { input: { messages: [{ role: "human", content: "still here" }] } })) as {
      messages: { content: string }[];
    };
    expect(echo.messages.at(-1)?.content).toBe("still here");
  });

  it("reuses an unchanged build, rebuilds when any file it read changes, and keeps only the newest", async () => {
    const project = mkdtempSync(join(REPO, "test", ".tmp-compile-")); // inside the repo: its node_modules resolve
    onTestFinished(() => rmSync(project, { recursive: true, force: true }));
    for (const f of ["count_graph.tsx", "counter.ts"]) copyFileSync(join(REPO, "test/fixtures/compiled", f), join(project, f));
    const dir = join(project, "out");
    const entry = join(project, "count_graph.tsx");
    const first = await compileModules([entry], dir);
    const manifest = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")) as { inputs: Record<string, unknown> };
    expect(Object.keys(manifest.inputs)).toEqual(expect.arrayContaining([entry, join(project, "counter.ts")]));
    expect(Object.keys(manifest.inputs).some((f) => f.includes("/node_modules/@langchain/langgraph/"))).toBe(true); // packages too
    expect(Object.keys(manifest.inputs)).toEqual(expect.arrayContaining([join(REPO, "tsconfig.json"), join(REPO, "package.json")])); // and build settings
    const second = await compileModules([entry], dir);
    expect(second.urls[entry]).toBe(first.urls[entry]);
    // an imported file (not the entry) changes: a new build, the old one removed
    writeFileSync(join(project, "counter.ts"), readFileSync(join(project, "counter.ts"), "utf8").replace("calls += 1", "calls += 2"));
    const third = await compileModules([entry], dir);
    expect(third.urls[entry]).not.toBe(first.urls[entry]);
    expect(existsSync(new URL(first.urls[entry]!))).toBe(false);
    expect(readdirSync(dir).sort()).toEqual([basename(dirname(fileURLToPath(third.urls[entry]!))), "in-use", "manifest.json"].sort()); // in-use: which build each process runs
    const mod = (await import(third.urls[entry]!)) as { graph: { invoke(i: unknown): Promise<{ call: number }> } };
    expect((await mod.graph.invoke({})).call).toBe(2);
    const plain = join(REPO, "bin/troupe.js");
    expect((await compileModules([plain], dir)).urls[plain]).toBe(pathToFileURL(plain).href); // plain JS: imported as it is
  });
});

describe("the troupe command's compiler cache (bin/troupe.js)", () => {
  it("a new compiler removes earlier versions' files, except one written in the last minute (a starting process may be about to import it)", () => {
    const cache = mkdtempSync(join(tmpdir(), "troupe-compiler-keep-"));
    onTestFinished(() => rmSync(cache, { recursive: true, force: true }));
    mkdirSync(join(cache, "loader"));
    const recent = join(cache, "loader", "compile-modules-1-1.mjs");
    const old = join(cache, "loader", "compile-modules-2-2.mjs");
    writeFileSync(recent, "export {};\n");
    writeFileSync(old, "export {};\n");
    const twoMinutesAgo = new Date(Date.now() - 120_000);
    utimesSync(old, twoMinutesAgo, twoMinutesAgo);
    execFileSync(process.execPath, [join(REPO, "bin/troupe.js"), "help"], { env: { ...process.env, TROUPE_COMPILE_CACHE: cache }, stdio: "pipe" });
    const left = readdirSync(join(cache, "loader"));
    expect(left).toContain("compile-modules-1-1.mjs");
    expect(left).not.toContain("compile-modules-2-2.mjs");
    expect(left.filter((f) => f.startsWith("compile-modules-"))).toHaveLength(2); // the new one and the recent one
  });
});
