// Cluster chores end to end (docs/CLUSTER.md): three real `troupe serve` nodes on one PostgreSQL,
// the SDK, and a real local HTTP receiver for webhooks. Webhooks are sent once per finished run by
// the node that finished it, and taken over when that node dies; a cron created through one node
// fires once per tick cluster-wide, also after that node is killed.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import pg from "pg";
import { startTestCluster, type TestCluster } from "./helpers/cluster-servers.ts";
import { REPO } from "./helpers/server.ts";
import { waitUntil } from "./helpers/wait.ts";

interface Hit {
  path: string;
  runId: string;
  webhookId: string;
  status: number;
}

let cluster: TestCluster;
let receiver: Server;
let receiverUrl: string;
let configDir: string;
const hits: Hit[] = [];
/** path → how many more attempts to answer 500 */
const failures = new Map<string, number>();

const sdk = (url: string) => new Client({ apiUrl: url, apiKey: null });
const input = { messages: [{ role: "human", content: "hook" }] };
const successes = (path: string) => hits.filter((h) => h.path === path && h.status === 200);
const attempts = (path: string) => hits.filter((h) => h.path === path);

beforeAll(async () => {
  receiver = createServer((req, res) => {
    let body = "";
    req.on("data", (d: Buffer) => (body += d.toString()));
    req.on("end", () => {
      const path = req.url ?? "";
      const left = failures.get(path) ?? 0;
      const status = left > 0 ? 500 : 200;
      if (left > 0) failures.set(path, left - 1);
      hits.push({ path, runId: String((JSON.parse(body) as { run_id?: string }).run_id), webhookId: String(req.headers["webhook-id"]), status });
      res.statusCode = status;
      res.end("ok");
    });
  });
  await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
  const port = (receiver.address() as AddressInfo).port;
  receiverUrl = `http://127.0.0.1:${port}`;
  configDir = mkdtempSync(join(tmpdir(), "troupe-cluster-config-"));
  const config = join(configDir, "langgraph.json");
  writeFileSync(
    config,
    JSON.stringify({
      graphs: { echo: join(REPO, "examples/echo.ts:graph") },
      webhooks: { url: { allowed_ports: [port], allow_private_addresses: true } },
      checkpointer: { ttl: { sweep_interval_minutes: 0.02 } }, // the thread TTL sweep every 1.2 s
    }),
  );
  cluster = await startTestCluster({ nodes: 3, config });
}, 180_000);

afterAll(async () => {
  await cluster?.close();
  receiver?.close();
  rmSync(configDir, { recursive: true, force: true });
});

test("a webhook being retried by one node is not taken on by another node's worker starting later", async () => {
  // run 1 on node 0: its first two attempts fail (2 s apart), then node 0 waits ~10 s to retry
  failures.set("/retried", 2);
  await sdk(cluster.nodes[0].url).runs.wait(null, "echo", { input, webhook: `${receiverUrl}/retried` });
  await waitUntil(() => attempts("/retried").length >= 2, { timeoutMs: 30_000, what: "two failed attempts" });
  // node 1's webhook worker starts now (its first webhook) while run 1's delivery waits in the outbox
  await sdk(cluster.nodes[1].url).runs.wait(null, "echo", { input, webhook: `${receiverUrl}/starter` });
  await waitUntil(() => successes("/retried").length >= 1 && successes("/starter").length >= 1, { timeoutMs: 60_000, what: "both deliveries" });
  // a second worker taking run 1 on would attempt it at the same due time: give it a moment to show
  await new Promise((r) => setTimeout(r, 3_000));
  expect(
    attempts("/retried").map((h) => h.status),
    JSON.stringify(attempts("/retried")),
  ).toEqual([500, 500, 200]);
  expect(new Set(attempts("/retried").map((h) => h.webhookId)).size).toBe(1);
  expect(successes("/starter"), JSON.stringify(attempts("/starter"))).toHaveLength(1);
}, 120_000);

test("runs spread over the three nodes: each finished run's webhook is sent exactly once", async () => {
  const runs = 9;
  for (let i = 0; i < runs; i++) await sdk(cluster.nextUrl()).runs.wait(null, "echo", { input, webhook: `${receiverUrl}/spread` });
  await waitUntil(() => successes("/spread").length >= runs, { timeoutMs: 30_000, what: `${runs} deliveries` });
  await new Promise((r) => setTimeout(r, 2_000));
  const ids = attempts("/spread").map((h) => h.runId);
  expect(ids).toHaveLength(runs);
  expect(new Set(ids).size).toBe(runs);
}, 90_000);

test("a delivery whose node was killed is made by a surviving node", async () => {
  // two failed attempts on node 2, then its next one is ~10 s away: kill it before that
  failures.set("/orphan", 2);
  await sdk(cluster.nodes[2].url).runs.wait(null, "echo", { input, webhook: `${receiverUrl}/orphan` });
  await waitUntil(() => attempts("/orphan").length >= 2, { timeoutMs: 30_000, intervalMs: 10, what: "two failed attempts" });
  await cluster.kill(2);
  // its node row expires (15 s), then the webhook-drain job (every 5 s) hands the row to its own worker
  await waitUntil(() => successes("/orphan").length >= 1, { timeoutMs: 90_000, intervalMs: 200, what: "the delivery by another node" });
  await new Promise((r) => setTimeout(r, 2_000));
  expect(attempts("/orphan").map((h) => h.status)).toEqual([500, 500, 200]);
  expect(new Set(attempts("/orphan").map((h) => h.webhookId)).size).toBe(1);
  await cluster.restart(2);
  await cluster.waitAlive(3);
}, 180_000);

test("a cron created through one node fires once per tick cluster-wide, and keeps firing after that node is killed", async () => {
  const everySeconds = 2;
  const created = await sdk(cluster.nodes[0].url).crons.create("echo", { schedule: `*/${everySeconds} * * * * *`, input, webhook: `${receiverUrl}/cron` });
  const from = Date.now();
  // the other nodes pick the cron up by their resync (every 5 s); then the node it was created on dies
  await new Promise((r) => setTimeout(r, 9_000));
  await cluster.kill(0);
  await new Promise((r) => setTimeout(r, 15_000));
  await sdk(cluster.nodes[1].url).crons.delete(created.cron_id);
  const to = Date.now();
  // a tick's run may still be finishing: let its webhook arrive
  await new Promise((r) => setTimeout(r, 3_000));
  const ticks = Math.floor(to / 1000 / everySeconds) - Math.ceil(from / 1000 / everySeconds) + 1;
  const runIds = attempts("/cron").map((h) => h.runId);
  expect(new Set(runIds).size).toBe(runIds.length); // each run's webhook once
  // once per tick: never more runs than ticks (three nodes schedule it), and the ticks after the kill fired too
  expect(runIds.length).toBeLessThanOrEqual(ticks + 1);
  expect(runIds.length).toBeGreaterThanOrEqual(Math.floor((ticks * 2) / 3));
  // the deleted cron's tick claims are gone
  const db = new pg.Client({ connectionString: cluster.databaseUri });
  await db.connect();
  try {
    expect((await db.query("SELECT 1 FROM cron_ticks WHERE cron_id = $1", [created.cron_id])).rowCount).toBe(0);
  } finally {
    await db.end();
  }
}, 120_000);

test("the thread TTL sweep runs as a cluster job: a thread created with a ttl through one node is deleted", async () => {
  const client = sdk(cluster.nodes[1].url);
  const short = await client.threads.create({ ttl: 0.005 });
  const kept = await client.threads.create();
  await waitUntil(
    () =>
      client.threads.get(short.thread_id).then(
        () => false,
        () => true,
      ),
    {
      timeoutMs: 30_000,
      intervalMs: 200,
      what: "the thread swept",
    },
  );
  expect((await sdk(cluster.nodes[2].url).threads.get(kept.thread_id)).thread_id).toBe(kept.thread_id);
}, 60_000);
