// GET /metrics end to end (issue 23): a real server, its /metrics read with a real Prometheus
// text-format parser, and the series checked to move as runs, errors, streams, webhooks and
// rate-limited requests happen.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import { REPO, startTestServer, type TestServer } from "./helpers/server.ts";
import { scrape } from "./helpers/metrics.ts";
import { waitUntil } from "./helpers/wait.ts";

const CONFIG = join(REPO, "test/fixtures/observability/service.json");
const human = (content: string) => ({ messages: [{ role: "human", content }] });

let server: TestServer;
let client: Client;
let receiver: Server;
let receiverUrl: string;

beforeAll(async () => {
  const flakySeen = new Set<string>();
  receiver = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      // /gone: 410 (given up at once); /flaky: 500 the first time, then 200; anything else 200
      const path = req.url ?? "";
      if (path.startsWith("/gone")) res.statusCode = 410;
      else if (path.startsWith("/flaky") && !flakySeen.has(path)) {
        flakySeen.add(path);
        res.statusCode = 500;
      }
      res.end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  server = await startTestServer({ config: CONFIG, extraArgs: ["--node-id", "metrics-node-1"] });
  client = new Client({ apiUrl: server.url, apiKey: null });
});
afterAll(async () => {
  await server?.stop();
  server?.cleanup();
  receiver?.close();
});

const metrics = () => scrape(server.url);

describe("GET /metrics", () => {
  it("counts runs by graph and final status, their durations and queue waits, and requests by route template", async () => {
    const before = await metrics();
    const t = await client.threads.create();
    for (let i = 0; i < 3; i++) await client.runs.wait(t.thread_id, "echo", { input: human(`hi ${i}`) });
    const failing = await client.threads.create();
    await client.runs.wait(failing.thread_id, "error", { input: human("boom") }).catch(() => undefined);
    for (const p of ["/no/such/path/1", "/wp-admin/x.php", `/threads/${t.thread_id}/nope`]) expect((await fetch(`${server.url}${p}`)).status).toBe(404);

    const after = await waitUntil(
      async () => {
        const m = await metrics();
        return m.value("troupe_runs_finished_total", { graph_id: "error", status: "error" }) >
          before.value("troupe_runs_finished_total", { graph_id: "error", status: "error" })
          ? m
          : undefined;
      },
      { what: "the failed run counted" },
    );
    const delta = (name: string, labels: Record<string, string>) => after.value(name, labels) - before.value(name, labels);
    expect(delta("troupe_runs_started_total", { graph_id: "echo" })).toBe(3);
    expect(delta("troupe_runs_finished_total", { graph_id: "echo", status: "success" })).toBe(3);
    expect(delta("troupe_runs_finished_total", { graph_id: "error", status: "error" })).toBe(1);
    expect(
      after.count("troupe_run_duration_seconds", { graph_id: "echo", status: "success" }) -
        before.count("troupe_run_duration_seconds", { graph_id: "echo", status: "success" }),
    ).toBe(3);
    expect(after.count("troupe_run_queue_wait_seconds", { graph_id: "echo" }) - before.count("troupe_run_queue_wait_seconds", { graph_id: "echo" })).toBe(3);
    expect(delta("lg_api_http_requests_total", { method: "POST", path: "/threads/:thread_id/runs/wait", status: "200" })).toBe(4);
    expect(delta("lg_api_http_requests_total", { method: "GET", path: "unmatched", status: "404" })).toBe(3);
    expect(after.count("lg_api_http_requests_latency_seconds", { method: "POST", path: "/threads/:thread_id/runs/wait" })).toBeGreaterThanOrEqual(4);
    // route templates only: no raw path (ids, scanner paths) ever becomes a label
    const paths = new Set(after.samples("lg_api_http_requests_total").map((s) => s.labels?.path));
    for (const p of paths) expect(p === "unmatched" || !/[0-9a-f]{8}-|wp-admin|no\/such/.test(p ?? "")).toBe(true);
    // every series carries the node label: the --node-id, which /info names too
    expect(after.samples("lg_api_http_requests_total").every((s) => s.labels?.node === "metrics-node-1")).toBe(true);
    expect(await (await fetch(`${server.url}/info`)).json()).toMatchObject({ node_id: "metrics-node-1", nodes_alive: 1 });
  });

  it("reports pending and running runs, how long the pending ones wait, and busy workers (lg_api_ gauges)", async () => {
    const t = await client.threads.create();
    const slow = { configurable: { sleep_ms: 4_000 } };
    const first = await client.runs.create(t.thread_id, "slow", { input: human("first"), config: slow });
    const second = await client.runs.create(t.thread_id, "slow", { input: human("second"), config: slow, multitaskStrategy: "enqueue" });
    const busy = await waitUntil(
      async () => {
        const m = await metrics();
        return m.value("lg_api_num_running_runs") >= 1 && m.value("lg_api_num_pending_runs") >= 1 && m.value("lg_api_pending_runs_wait_time_max") >= 0.5
          ? m
          : undefined;
      },
      { what: "a running and a pending run in the gauges", timeoutMs: 15_000 },
    );
    expect(busy.value("lg_api_workers_max")).toBe(2);
    expect(busy.value("lg_api_workers_active")).toBeGreaterThanOrEqual(1);
    expect(busy.value("lg_api_workers_available")).toBe(busy.value("lg_api_workers_max") - busy.value("lg_api_workers_active"));
    expect(busy.value("lg_api_pending_runs_wait_time_med")).toBeGreaterThan(0);
    // the pending run is held back by the running one on its thread: it is not "unblocked"
    expect(busy.value("lg_api_pending_unblocked_runs_wait_time_max")).toBeLessThan(busy.value("lg_api_pending_runs_wait_time_max"));

    await client.runs.cancel(t.thread_id, second.run_id);
    await client.runs.cancel(t.thread_id, first.run_id, true);
    const idle = await waitUntil(
      async () => {
        const m = await metrics();
        return m.value("lg_api_num_running_runs") === 0 && m.value("lg_api_num_pending_runs") === 0 ? m : undefined;
      },
      { what: "the gauges back at zero" },
    );
    expect(idle.value("lg_api_pending_runs_wait_time_max")).toBe(0);
    expect(idle.value("lg_api_workers_active")).toBe(0);
    expect(idle.value("troupe_runs_finished_total", { graph_id: "slow", status: "interrupted" })).toBeGreaterThanOrEqual(2);
  });

  it("counts open streams while a client reads one", async () => {
    const t = await client.threads.create();
    const run = await client.runs.create(t.thread_id, "slow", { input: human("stream"), config: { configurable: { sleep_ms: 2_500 } } });
    const baseline = (await metrics()).value("troupe_stream_subscribers", { kind: "sse" });
    const reading = (async () => {
      for await (const _ of client.runs.joinStream(t.thread_id, run.run_id)) void _;
    })();
    await waitUntil(async () => (await metrics()).value("troupe_stream_subscribers", { kind: "sse" }) === baseline + 1, { what: "the open stream counted" });
    await reading;
    await waitUntil(async () => (await metrics()).value("troupe_stream_subscribers", { kind: "sse" }) === baseline, { what: "the closed stream uncounted" });
  });

  it("counts webhook deliveries by outcome, attempts and retries", async () => {
    const before = await metrics();
    const t = await client.threads.create();
    for (const path of ["/ok", "/gone", "/flaky"]) await client.runs.wait(t.thread_id, "echo", { input: human("hook"), webhook: `${receiverUrl}${path}` });
    // the flaky receiver's second attempt comes after the outbox's first retry delay (~2 s)
    const after = await waitUntil(
      async () => {
        const m = await metrics();
        return m.value("troupe_webhook_deliveries_total", { outcome: "delivered" }) -
          before.value("troupe_webhook_deliveries_total", { outcome: "delivered" }) >=
          2
          ? m
          : undefined;
      },
      { what: "the retried delivery counted", timeoutMs: 20_000 },
    );
    const delta = (name: string, labels?: Record<string, string>) => after.value(name, labels) - before.value(name, labels);
    expect(delta("troupe_webhook_deliveries_total", { outcome: "delivered" })).toBe(2);
    expect(delta("troupe_webhook_deliveries_total", { outcome: "failed" })).toBe(1);
    expect(delta("troupe_webhook_attempts_total")).toBe(4);
    expect(delta("troupe_webhook_retries_total")).toBe(1);
  });

  it("reports storage size and each thread's event-loop use and heap", async () => {
    const before = await metrics();
    // ~2 MB of records that do not compress: the storage's size (LMDB: pages in use; PostgreSQL:
    // Troupe's tables) grows by about that much
    for (let i = 0; i < 16; i++) await client.store.putItem(["storage-size"], `blob-${i}`, { blob: randomBytes(96_000).toString("base64") });
    const m = await metrics();
    const used = m.value("troupe_storage_bytes", { kind: "used" });
    expect(used - before.value("troupe_storage_bytes", { kind: "used" })).toBeGreaterThan(1_000_000);
    expect(m.value("troupe_storage_bytes", { kind: "file" })).toBeGreaterThanOrEqual(used);
    for (const thread of ["http", "actor-0", "actor-1"]) {
      expect(m.value("troupe_thread_heap_used_bytes", { thread })).toBeGreaterThan(1_000_000);
      const elu = m.value("troupe_thread_event_loop_utilization", { thread });
      expect(elu).toBeGreaterThanOrEqual(0);
      expect(elu).toBeLessThanOrEqual(1);
    }
    expect(m.family("lg_api_num_pending_runs")?.type).toBe("GAUGE");
    expect(m.family("lg_api_http_requests_total")?.type).toBe("COUNTER");
    expect(m.family("troupe_run_duration_seconds")?.type).toBe("HISTOGRAM");
  });

  it("exposes every series the Grafana dashboard queries (rate-limit decisions: on serve with limits, below)", async () => {
    const dashboard = readFileSync(join(REPO, "docs/grafana/troupe-dashboard.json"), "utf8");
    const queried = new Set([...dashboard.matchAll(/\b((?:lg_api|troupe|process)_[a-z_]+?)(?:_bucket)?\{/g)].map((m) => m[1]));
    expect(queried.size).toBeGreaterThan(15);
    const exposed = new Set((await metrics()).families.map((f) => f.name));
    for (const name of queried) if (name !== "troupe_rate_limit_decisions_total") expect(exposed.has(name), name).toBe(true);
  });

  it("answers ?format=json in the platform's shape, with every series", async () => {
    const res = await fetch(`${server.url}/metrics?format=json`);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body.queue).toEqual({
      n_pending: expect.any(Number),
      n_running: expect.any(Number),
      pending_runs_wait_time_max_secs: expect.any(Number),
      pending_runs_wait_time_med_secs: expect.any(Number),
      pending_unblocked_runs_wait_time_max_secs: expect.any(Number),
    });
    expect(body.workers).toEqual({ max: 2, active: expect.any(Number), available: expect.any(Number) });
    expect((body.api as { http_requests_total: unknown[] }).http_requests_total).toContainEqual({
      method: "GET",
      path: "/metrics",
      status: 200,
      count: expect.any(Number),
    });
    expect((body.metrics as { name: string }[]).map((m) => m.name)).toContain("troupe_runs_finished_total");
    // any other format is the text format, as upstream
    expect((await fetch(`${server.url}/metrics?format=xml`)).headers.get("content-type")).toMatch(/^text\/plain/);
  });
});

describe("GET /metrics on troupe serve with custom auth and rate limits", () => {
  let serve: TestServer;
  beforeAll(async () => {
    serve = await startTestServer({
      command: "serve",
      config: join(REPO, "test/fixtures/auth/service.json"),
      extraArgs: ["--host", "127.0.0.1", "--rate-limit", "us", "--rate-limit-scale", "0.05", "--trusted-proxies", "127.0.0.1"],
    });
  });
  afterAll(async () => {
    await serve?.stop();
    serve?.cleanup();
  });

  it("is open like /info while the API needs credentials, and counts rate-limit decisions by rule", async () => {
    const asClient = (ip: string) => ({ "x-forwarded-for": ip });
    expect(
      (await fetch(`${serve.url}/threads`, { method: "POST", headers: { ...asClient("10.1.0.1"), "content-type": "application/json" }, body: "{}" })).status,
    ).toBe(401);
    // the anonymous catch-all, scaled to 5 requests a minute per client
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push((await fetch(`${serve.url}/ok`, { headers: asClient("10.2.0.2") })).status);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(2);
    const m = await scrape(serve.url, asClient("10.3.0.3"));
    expect(m.value("troupe_rate_limit_decisions_total", { rule: "catch-all.ip", decision: "limited" })).toBeGreaterThanOrEqual(2);
    expect(m.value("troupe_rate_limit_decisions_total", { rule: "catch-all.ip", decision: "allowed" })).toBeGreaterThanOrEqual(5);
    // requests answered by a guard are counted under the route they named
    expect(m.value("lg_api_http_requests_total", { method: "POST", path: "/threads", status: "401" })).toBe(1);
    expect(m.value("lg_api_http_requests_total", { method: "GET", path: "/ok", status: "429" })).toBeGreaterThanOrEqual(2);
  });
});

describe("http.disable_meta", () => {
  let noMeta: TestServer;
  beforeAll(async () => {
    noMeta = await startTestServer({ config: join(REPO, "test/fixtures/observability/service-no-meta.json") });
  });
  afterAll(async () => {
    await noMeta?.stop();
    noMeta?.cleanup();
  });

  it("removes /metrics with /openapi.json, /info and /docs; /ok stays", async () => {
    for (const p of ["/metrics", "/metrics?format=json", "/info", "/openapi.json", "/docs"]) expect((await fetch(`${noMeta.url}${p}`)).status, p).toBe(404);
    expect(await (await fetch(`${noMeta.url}/ok`)).json()).toEqual({ ok: true });
  });
});
