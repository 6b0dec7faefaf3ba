// Indexed queries through a real server: a data dir written before the indexes is indexed on
// start (with progress lines), a build killed with kill -9 midway resumes on the next start,
// searches and counts answer from the indexes with the SDK, a search no index serves walks the
// records in slices (requests sent meanwhile are answered first), and run lists by status.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { open } from "lmdb";
import { Client } from "@langchain/langgraph-sdk";
import { describe, expect, it } from "vitest";
import { dataFilePath } from "../src/storage/env.ts";
import type { ThreadRecord, ThreadStatus } from "../src/storage/records.ts";
import { REPO, TEST_BACKEND, TEST_CONFIG, startTestServer } from "./helpers/server.ts";
import { human, rawRequest, useServer } from "./helpers/suite.ts";
import { waitUntil } from "./helpers/wait.ts";

const THREADS = 100_000;
const STATUSES: ThreadStatus[] = ["idle", "busy", "interrupted", "error"];
const uuidOf = (i: number) => `00000000-0000-4000-8000-${i.toString(16).padStart(12, "0")}`;
const legacyThread = (i: number): ThreadRecord => ({
  thread_id: uuidOf(i),
  created_at: new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString(),
  updated_at: new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString(),
  metadata: { user_id: `user-${i % 100}`, graph_id: "echo" },
  status: STATUSES[i % 4],
  config: {},
});

/** Threads as an older Troupe stored them: the records, no index. */
async function writeLegacyDataDir(dir: string, n: number): Promise<void> {
  const root = open({ path: dataFilePath(dir), maxDbs: 32, compression: false, noSync: true });
  const threads = root.openDB<ThreadRecord, string>({ name: "threads", encoding: "msgpack", sharedStructuresKey: Symbol.for("structures") });
  for (let c = 0; c < n; c += 20_000) {
    await root.transaction(() => {
      for (let i = c; i < Math.min(n, c + 20_000); i++) threads.put(uuidOf(i), legacyThread(i));
    });
  }
  await root.close();
}

/** Starts a server on `dataDir` and kills it (-9) once it printed a progress line of its index build. */
async function killDuringIndexBuild(dataDir: string): Promise<string> {
  const args = [join(REPO, "bin/troupe.js"), "dev", "--port", "0", "--config", TEST_CONFIG, "--data-dir", dataDir, "--workers", "1"];
  const proc = spawn(process.execPath, args, { cwd: REPO, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  return new Promise((resolve, reject) => {
    const onData = (d: Buffer) => {
      out += d.toString();
      if (/indexing threads: \d+ \/ \d+/.test(out)) proc.kill("SIGKILL");
      else if (/indexed \d+ threads|listening/.test(out)) {
        proc.kill("SIGKILL");
        reject(new Error(`the index build finished before a progress line; nothing was cut short:\n${out}`));
      }
    };
    proc.stdout!.on("data", onData);
    proc.stderr!.on("data", onData);
    proc.once("exit", () => resolve(out));
  });
}

// LMDB's own secondary indexes (built at start from an LMDB data dir); PostgreSQL's are created by its migrations
describe.skipIf(TEST_BACKEND === "postgres")("a data dir from before the indexes", () => {
  it("is indexed on start, resumes a build killed midway, and answers searches and counts from the indexes", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "troupe-idx-e2e-"));
    try {
      await writeLegacyDataDir(dataDir, THREADS);
      const killed = await killDuringIndexBuild(dataDir);
      expect(killed).toContain(`indexing threads: ${THREADS} records`);

      const server = await startTestServer({ dataDir, workers: 1 });
      try {
        expect(server.output()).toMatch(new RegExp(`indexing threads: ${THREADS} records \\(resuming after \\d+\\)`));
        expect(server.output()).toMatch(new RegExp(`indexed ${THREADS} threads in`));
        const client = new Client({ apiUrl: server.url, apiKey: null });

        // newest first by default; user-7's threads are i = 7, 107, 207, ...
        const mine = await client.threads.search({ metadata: { user_id: "user-7" }, limit: 3 });
        expect(mine.map((t) => t.thread_id)).toEqual([THREADS - 93, THREADS - 193, THREADS - 293].map(uuidOf));
        expect(await client.threads.count({ metadata: { user_id: "user-7" } })).toBe(THREADS / 100);
        // user-7's threads all have status error (i % 4 = 3): one term with many entries, the other with none of them
        expect(await client.threads.count({ metadata: { user_id: "user-7" }, status: "error" })).toBe(THREADS / 100);
        expect(await client.threads.count({ metadata: { user_id: "user-7" }, status: "interrupted" })).toBe(0);
        expect(await client.threads.count({})).toBe(THREADS);
        const page = await rawRequest(server.url, "/threads/search", {
          method: "POST",
          body: JSON.stringify({ status: "error", limit: 2, offset: 4, sort_by: "updated_at", sort_order: "asc" }),
        });
        expect((page.body as ThreadRecord[]).map((t) => t.thread_id)).toEqual([19, 23].map(uuidOf));
        expect(page.headers.get("x-pagination-total")).toBe(String(THREADS / 4));
        expect(page.headers.get("x-pagination-next")).toBe("6");

        // a search no index serves (state values) walks every thread in slices: requests sent
        // meanwhile are answered while it runs (a scan in one go would hold them all until it ends)
        let scanDone = false;
        const scan = rawRequest(server.url, "/threads/search", { method: "POST", body: JSON.stringify({ values: { nope: 1 } }) }).finally(
          () => (scanDone = true),
        );
        let okDuringScan = 0;
        while (!scanDone) {
          await rawRequest(server.url, "/ok");
          if (!scanDone) okDuringScan++;
        }
        expect((await scan).body).toEqual([]);
        expect(okDuringScan).toBeGreaterThanOrEqual(3);
      } finally {
        await server.stop();
      }

      // built: a restart does not index again
      const again = await startTestServer({ dataDir, workers: 1 });
      await again.stop();
      expect(again.output()).not.toContain("indexing");
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 240_000);
});

describe("run lists by status", () => {
  const fx = useServer({ workers: 1 });

  it("lists a thread's pending and running runs (from active_runs) and its finished ones, oldest first", async () => {
    const t = await fx.client.threads.create();
    const slow = { input: human("slow"), config: { configurable: { sleep_ms: 3_000 } } };
    const running = await fx.client.runs.create(t.thread_id, "slow", slow);
    const queued = [await fx.client.runs.create(t.thread_id, "slow", slow), await fx.client.runs.create(t.thread_id, "slow", slow)];
    await waitUntil(async () => (await fx.client.runs.get(t.thread_id, running.run_id)).status === "running", { what: "the run to start" });
    expect((await fx.client.runs.list(t.thread_id, { status: "running" })).map((r) => r.run_id)).toEqual([running.run_id]);
    expect((await fx.client.runs.list(t.thread_id, { status: "pending" })).map((r) => r.run_id)).toEqual(queued.map((r) => r.run_id));
    expect((await fx.client.runs.list(t.thread_id, { status: "pending", offset: 1 })).map((r) => r.run_id)).toEqual([queued[1].run_id]);
    await fx.client.runs.cancel(t.thread_id, queued[0].run_id, true);
    expect((await fx.client.runs.list(t.thread_id, { status: "interrupted" })).map((r) => r.run_id)).toEqual([queued[0].run_id]);
    await fx.client.runs.cancel(t.thread_id, running.run_id, true);
    await fx.client.runs.cancel(t.thread_id, queued[1].run_id, true);
  }, 60_000);
});
