// A cluster node (a server on PostgreSQL) whose actor shard dies: the shard's actors and lease
// fences go with it, so the node hands its threads' leases over at once and a takeover scan
// recovers their runs on the restarted shard (docs/CLUSTER.md, "Lease lifecycle"). Without that,
// the node kept renewing those leases and the runs the dead shard was executing stayed running.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import { afterAll, beforeAll, expect, test } from "vitest";
import { usePostgresDatabase } from "./helpers/postgres.ts";
import { REPO, startTestServer, type TestServer } from "./helpers/server.ts";
import { waitUntil } from "./helpers/wait.ts";

const db = usePostgresDatabase();
let server: TestServer;
let client: Client;
const human = (content: string) => ({ messages: [{ role: "human", content }] });
type Messages = { messages: { content: string; type: string }[] };
const FINAL = new Set(["success", "error", "interrupted", "timeout"]);

beforeAll(async () => {
  server = await startTestServer({
    command: "serve",
    config: join(REPO, "test/fixtures/cluster/shard-crash/service.json"),
    databaseUri: db.uri,
    workers: 1, // every thread on the shard that dies
    extraArgs: ["--host", "127.0.0.1"],
    env: { TROUPE_CLUSTER_LEASE_TTL_MS: "3000" }, // takeover scans every second
  });
  client = new Client({ apiUrl: server.url, apiKey: null });
}, 60_000);

afterAll(async () => {
  await server?.stop();
  server?.cleanup();
});

test("a shard dies under a running run: its threads' leases are handed over and their runs recovered on the restarted shard", async () => {
  const t = await client.threads.create();
  const running = await client.runs.create(t.thread_id, "slow", { input: human("survives"), config: { configurable: { sleep_ms: 2_000 } } });
  await waitUntil(async () => (await client.runs.get(t.thread_id, running.run_id)).status === "running", { what: "the slow run running" });

  const u = await client.threads.create();
  const marker = join(mkdtempSync(join(tmpdir(), "troupe-crash-")), "crashed");
  const crashing = await client.runs.create(u.thread_id, "crash", { input: human("again"), config: { configurable: { marker } } });

  for (const [thread, run] of [
    [t.thread_id, running.run_id],
    [u.thread_id, crashing.run_id],
  ]) {
    const ended = await waitUntil(
      async () => {
        const r = await client.runs.get(thread, run);
        return FINAL.has(r.status) ? r : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 250, what: `run ${run} final after the shard died` },
    );
    expect(ended.status).toBe("success"); // resumed (a second attempt) on the restarted shard
  }
  expect(server.output()).toContain("actor shard died");
  for (const thread of [t.thread_id, u.thread_id])
    await waitUntil(async () => (await client.threads.get(thread)).status === "idle", { what: "the thread idle" });
  const after = (await client.runs.wait(t.thread_id, "slow", { input: human("after"), config: { configurable: { sleep_ms: 0 } } })) as Messages;
  expect(after.messages.filter((m) => m.type === "human").map((m) => m.content)).toEqual(["survives", "after"]);
}, 90_000);
