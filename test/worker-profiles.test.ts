// Opt-in worker profiles (TROUPE_CPU_PROFILE_DIR, TROUPE_HEAP_PROFILE_DIR, TROUPE_CALL_COUNTS_DIR)
// and the bench's summaries of them: a shard of a real server writes its files when the server shuts
// down, and the summaries read them.
import { describe, expect, it, onTestFinished } from "vitest";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import { startTestServer } from "./helpers/server.ts";
import { categoriseProfile, profileWithin, summariseProfile, type CpuProfileFile } from "../bench/profile-summary.ts";
import { summariseAllocations } from "../bench/alloc-summary.ts";
import { callsByFunction, compareCallCounts } from "../bench/call-counts.ts";
import { startProfile } from "../src/util/worker-profiles.ts";

describe("worker profiles", () => {
  it("is a no-op without a directory", async () => {
    expect(await startProfile("cpu", undefined, "x").stop()).toBeUndefined();
    expect(await startProfile("heap", undefined, "x").stop()).toBeUndefined();
    expect(await startProfile("calls", undefined, "x").stop()).toBeUndefined();
  });

  it("writes one profile per actor shard on shutdown, and the summary names the graph code", async () => {
    const dir = mkdtempSync(join(tmpdir(), "troupe-prof-"));
    const server = await startTestServer({ workers: 1, env: { TROUPE_CPU_PROFILE_DIR: dir } });
    try {
      const client = new Client({ apiUrl: server.url, apiKey: null });
      for (let i = 0; i < 20; i++) await client.runs.wait(null, "echo", { input: { messages: [{ role: "human", content: "hi" }] } });
    } finally {
      await server.stop();
    }
    // the data dir is kept until the summary is read: it holds the compiled worker code's source maps
    onTestFinished(() => server.cleanup());
    const files = readdirSync(dir).filter((f) => f.endsWith(".cpuprofile"));
    expect(files).toHaveLength(1);
    expect(files[0]).toMatch(/^shard0-\d+-\d+\.cpuprofile$/);
    const summary = summariseProfile(JSON.parse(readFileSync(join(dir, files[0]), "utf8")) as CpuProfileFile, 500);
    expect(summary.samples).toBeGreaterThan(0);
    expect(summary.inclusive[0].name).toMatch(/^\(root\)/);
    expect(summary.inclusive.some((r) => r.name.includes("run-executor.ts"))).toBe(true);
    // self time by owner: Troupe's compiled code, LangGraph's package, V8's own entries
    const owners = summary.byOwner.map((r) => r.name);
    expect(owners).toEqual(expect.arrayContaining(["troupe", "@langchain/langgraph", "(garbage collector)"]));
    expect(summary.byOwner.reduce((sum, r) => sum + r.percent, 0)).toBeCloseTo(100, 5);
    // --within: only the samples with a run-executor frame on their stack
    const executor = /run-executor\.ts/;
    const within = profileWithin(JSON.parse(readFileSync(join(dir, files[0]), "utf8")) as CpuProfileFile, executor);
    expect(within.samples.length).toBeGreaterThan(0);
    expect(within.samples.length).toBeLessThan(summary.samples);
    expect(categoriseProfile(within, [{ name: "executor", pattern: executor }])).toEqual([{ name: "executor", percent: 100 }]);
  });

  it("writes a shard's allocation profile and call counts; the summaries name Troupe's code and count runs", async () => {
    const heapDir = mkdtempSync(join(tmpdir(), "troupe-heap-"));
    const callsDir = mkdtempSync(join(tmpdir(), "troupe-calls-"));
    const server = await startTestServer({ workers: 1, env: { TROUPE_HEAP_PROFILE_DIR: heapDir, TROUPE_CALL_COUNTS_DIR: callsDir } });
    const runs = 12;
    try {
      const client = new Client({ apiUrl: server.url, apiKey: null });
      for (let i = 0; i < runs; i++) await client.runs.wait(null, "echo", { input: { messages: [{ role: "human", content: "hi" }] } });
    } finally {
      await server.stop();
    }
    onTestFinished(() => server.cleanup());
    const heapFiles = readdirSync(heapDir);
    expect(heapFiles).toHaveLength(1);
    expect(heapFiles[0]).toMatch(/^shard0-\d+-\d+\.heapprofile$/);
    const alloc = summariseAllocations(JSON.parse(readFileSync(join(heapDir, heapFiles[0]), "utf8")).head, 500);
    expect(alloc.total).toBeGreaterThan(0);
    expect(alloc.byOwner.map((r) => r.name)).toEqual(expect.arrayContaining(["troupe", "@langchain/langgraph"]));
    expect(alloc.byFunction.some((r) => /actors\/[a-z-]+\.ts:\d+$/.test(r.name))).toBe(true);

    const callFiles = readdirSync(callsDir);
    expect(callFiles).toHaveLength(1);
    expect(callFiles[0]).toMatch(/^shard0-\d+-\d+\.callcounts$/);
    const scripts = JSON.parse(readFileSync(join(callsDir, callFiles[0]), "utf8"));
    const perRun = [...callsByFunction(scripts)].filter(([k]) => k.startsWith("buildRunConfig "));
    expect(perRun.reduce((n, [, c]) => n + c, 0)).toBe(runs); // once per run: the per-run count is right
    const same = compareCallCounts(scripts, scripts, { only: /^buildRunConfig / });
    expect(same.runs).toEqual([runs, runs]);
    expect(same.rows).toEqual([expect.objectContaining({ a: 1, b: 1 })]);
  });
});
