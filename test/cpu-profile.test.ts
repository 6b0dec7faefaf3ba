// Opt-in worker CPU profiles (TROUPE_CPU_PROFILE_DIR) and the bench's profile summary: a shard of a
// real server writes its profile when the server shuts down, and the summary reads it.
import { describe, expect, it, onTestFinished } from "vitest";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import { startTestServer } from "./helpers/server.ts";
import { categoriseProfile, profileWithin, summariseProfile, type CpuProfileFile } from "../bench/profile-summary.ts";
import { startCpuProfile } from "../src/util/cpu-profile.ts";

describe("cpu profiles", () => {
  it("is a no-op without a directory", async () => {
    expect(await startCpuProfile(undefined, "x").stop()).toBeUndefined();
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
    // --within: only the samples with a run-executor frame on their stack
    const executor = /run-executor\.ts/;
    const within = profileWithin(JSON.parse(readFileSync(join(dir, files[0]), "utf8")) as CpuProfileFile, executor);
    expect(within.samples.length).toBeGreaterThan(0);
    expect(within.samples.length).toBeLessThan(summary.samples);
    expect(categoriseProfile(within, [{ name: "executor", pattern: executor }])).toEqual([{ name: "executor", percent: 100 }]);
  });
});
