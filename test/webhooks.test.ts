// Run-completion webhooks: payload shape, URL policy, the sender against a real HTTP receiver
// and the dedicated worker thread started for real.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { MessageChannel, Worker } from "node:worker_threads";
import { mkdtempSync, rmSync } from "node:fs";
import { lookup } from "node:dns/promises";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { buildWebhookPayload, stampSentAt, type WebhookPayload } from "../src/webhooks/payload.ts";
import { validateWebhookUrl, type WebhookUrlPolicy } from "../src/webhooks/url-policy.ts";
import { parseRetryAfter, WebhookSender } from "../src/webhooks/sender.ts";
import { guardedLookup, REFUSED_ADDRESS } from "../src/webhooks/address-check.ts";
import { WebhookWorkerHost } from "../src/webhooks/host.ts";
import { compileModules } from "../src/loader/compile-modules.ts";
import type { WebhookWorkerData } from "../src/webhooks/messages.ts";
import { BoundedRunner } from "../src/webhooks/limiter.ts";
import type { RunRecord } from "../src/storage/records.ts";

// ---------- helpers ----------

interface Received {
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  raw: string;
  body: WebhookPayload;
}

function parseJson(raw: string): WebhookPayload {
  try {
    return JSON.parse(raw) as WebhookPayload;
  } catch {
    return {} as WebhookPayload; // assertions on fields then fail visibly
  }
}

type Handler = (req: Received, res: ServerResponse, index: number) => void;

/** A real HTTP receiver on port 0; `next(n)` resolves once n requests in total have arrived. */
class Receiver {
  readonly received: Received[] = [];
  private waiters: { n: number; resolve: () => void }[] = [];
  private server!: Server;
  url = "";

  constructor(private handler: Handler = (_r, res) => res.end("ok")) {}

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const raw = Buffer.concat(chunks).toString("utf8");
        const r: Received = { method: req.method!, url: req.url!, headers: req.headers, raw, body: parseJson(raw) };
        this.received.push(r);
        this.handler(r, res, this.received.length - 1);
        this.waiters = this.waiters.filter((w) => (this.received.length >= w.n ? (w.resolve(), false) : true));
      });
    });
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  next(n: number): Promise<void> {
    if (this.received.length >= n) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ n, resolve }));
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

const T0 = "2026-01-01T00:00:00.000Z";
const T1 = "2026-01-01T00:00:01.000Z";
const T2 = "2026-01-01T00:00:02.000Z";

function runRecord(over: Partial<RunRecord> = {}): RunRecord {
  return {
    run_id: "1ef0e0e0-0000-6000-8000-000000000001",
    thread_id: "1ef0e0e0-0000-6000-8000-000000000002",
    assistant_id: "fe096781-5601-53d2-b2f6-0d3403f7e9ca",
    metadata: { who: "test" },
    status: "success",
    kwargs: { input: { messages: [] }, config: { configurable: {} }, stream_mode: ["values"], webhook: "http://example.com/hook", temporary: false, subgraphs: false, resumable: false },
    multitask_strategy: "enqueue",
    created_at: T0,
    updated_at: T2,
    graph_id: "agent",
    attempt: 1,
    started_at: T1,
    ended_at: T2,
    ...over,
  };
}

const policy = (over: Partial<WebhookUrlPolicy> = {}): WebhookUrlPolicy => ({
  allowedDomains: [],
  requireHttps: false,
  allowedPorts: "any",
  disableLoopback: false,
  maxUrlLength: 2048,
  allowPrivateAddresses: true,
  ...over,
});

const quietLog = () => {
  const lines: string[] = [];
  return { lines, log: (m: string) => void lines.push(m) };
};

// ---------- payload ----------

describe("buildWebhookPayload", () => {
  it("emits the wire run, timings and values for a successful stateful run, without internal fields", () => {
    const p = buildWebhookPayload(runRecord(), { messages: [{ type: "ai", content: "hi" }] }, false);
    expect(Object.keys(p)).toEqual([
      "run_id", "thread_id", "assistant_id", "metadata", "status", "kwargs", "multitask_strategy", "created_at", "updated_at",
      "run_started_at", "run_ended_at", "values",
    ]);
    expect(p.status).toBe("success");
    expect(p.run_started_at).toBe(T1);
    expect(p.run_ended_at).toBe(T2);
    expect(p.values).toEqual({ messages: [{ type: "ai", content: "hi" }] });
    expect(p.kwargs.webhook).toBe("http://example.com/hook");
    for (const k of ["graph_id", "attempt", "on_completion", "started_at", "ended_at", "error", "webhook_sent_at"]) expect(p).not.toHaveProperty(k);
  });

  it("carries a failed run's error as an object and omits values of stateless runs", () => {
    const p = buildWebhookPayload(runRecord({ status: "error", error: { error: "ValueError", message: "Boo!" } }), { messages: [] }, true);
    expect(p.error).toEqual({ error: "ValueError", message: "Boo!" });
    expect(p).not.toHaveProperty("values");
    expect(Object.keys(p).at(-1)).toBe("error");
  });

  it("omits run_ended_at for a run that has not ended, and values when none are given", () => {
    const p = buildWebhookPayload(runRecord({ status: "interrupted", ended_at: undefined }), undefined, false);
    expect(p).not.toHaveProperty("run_ended_at");
    expect(p).not.toHaveProperty("values");
    expect(p).not.toHaveProperty("error");
    expect(p.run_started_at).toBe(T1);
  });

  it("gives a failed run without a recorded error a generic error object", () => {
    expect(buildWebhookPayload(runRecord({ status: "error" }), undefined, false).error).toEqual({ error: "Error", message: "run failed" });
  });

  it("stampSentAt places webhook_sent_at before values/error, leaving the input untouched", () => {
    const p = buildWebhookPayload(runRecord({ status: "error", error: { error: "E", message: "m" } }), { a: 1 }, false);
    const s = stampSentAt(p, T2);
    expect(Object.keys(s).slice(-4)).toEqual(["run_ended_at", "webhook_sent_at", "values", "error"]);
    expect(p).not.toHaveProperty("webhook_sent_at");
    expect(Object.keys(stampSentAt(buildWebhookPayload(runRecord(), undefined, true), T2)).at(-1)).toBe("webhook_sent_at");
  });
});

// ---------- URL policy ----------

describe("validateWebhookUrl", () => {
  const ok = (url: string, p: Partial<WebhookUrlPolicy> = {}) => expect(validateWebhookUrl(url, policy(p))).toBeNull();
  const bad = (url: string, p: Partial<WebhookUrlPolicy>, re: RegExp) => expect(validateWebhookUrl(url, policy(p))).toMatch(re);

  it("accepts http(s) and relative URLs by default, any port", () => {
    ok("https://hooks.example.com/x?token=s");
    ok("http://127.0.0.1:45678/hook");
    ok("/custom/webhook");
  });

  it("rejects unparseable URLs and other schemes", () => {
    bad("not a url", {}, /not a valid/);
    bad("//evil.example.com/x", {}, /not a valid/);
    bad("ftp://example.com/x", {}, /scheme must be http or https/);
    bad("file:///etc/passwd", {}, /scheme/);
    bad("", {}, /empty/);
  });

  it("applies allowed_domains exactly and with subdomain wildcards (not the apex)", () => {
    const allowedDomains = ["api.example.com", "*.hooks.test"];
    ok("https://api.example.com/x", { allowedDomains });
    ok("https://API.Example.com/x", { allowedDomains });
    ok("https://a.hooks.test/x", { allowedDomains });
    ok("https://b.a.hooks.test/x", { allowedDomains });
    bad("https://hooks.test/x", { allowedDomains }, /allowed_domains/);
    bad("https://evilhooks.test/x", { allowedDomains }, /allowed_domains/);
    bad("https://example.com/x", { allowedDomains }, /allowed_domains/);
    bad("https://api.example.com.evil.io/x", { allowedDomains }, /allowed_domains/);
  });

  it("enforces require_https", () => {
    bad("http://example.com/x", { requireHttps: true }, /https/);
    ok("https://example.com/x", { requireHttps: true });
  });

  it("checks ports against allowed_ports with scheme defaults", () => {
    ok("https://example.com/x", { allowedPorts: [443] });
    ok("http://example.com/x", { allowedPorts: [80] });
    ok("https://example.com:8443/x", { allowedPorts: [443, 8443] });
    bad("https://example.com:8443/x", { allowedPorts: [443] }, /port 8443/);
    bad("http://example.com/x", { allowedPorts: [443] }, /port 80/);
  });

  it("allows only 443 for https and 80 for http when allowed_ports is not configured on troupe serve", () => {
    const p = { allowedPorts: "scheme" as const };
    ok("https://example.com/x", p);
    ok("https://example.com:443/x", p);
    ok("http://example.com/x", p);
    bad("https://example.com:8443/x", p, /port 8443 is not allowed/);
    bad("http://example.com:443/x", p, /port 443 is not allowed/);
    bad("http://example.com:8080/x", p, /port 8080/);
  });

  it("refuses internal addresses in every spelling when private addresses are not allowed", () => {
    const p = { allowPrivateAddresses: false };
    for (const u of ["http://127.0.0.1/x", "http://2130706433/x", "http://0x7f.1/x", "http://localhost/x", "http://a.localhost/x", "http://[::1]/x",
      "http://10.1.2.3/x", "http://172.16.0.1/x", "http://172.31.255.255/x", "http://192.168.1.1/x", "http://100.64.0.1/x",
      "http://169.254.169.254/latest/meta-data", "http://0.0.0.0/x", "http://[::]/x", "http://[fd00::1]/x", "http://[fc00::1]/x", "http://[fe80::1]/x",
      "http://[::ffff:10.0.0.1]/x", "http://[::ffff:169.254.169.254]/x", "http://[::ffff:127.0.0.1]/x", "http://[::127.0.0.1]/x",
      "http://[64:ff9b::a9fe:a9fe]/x", "http://[2002:c0a8:101::1]/x", "http://host.docker.internal/x"]) {
      bad(u, p, /is a (loopback|private|link-local|unspecified) address, refused by the URL policy \(webhooks\.url\.allow_private_addresses\)/);
    }
    for (const u of ["https://example.com/x", "http://8.8.8.8/x", "http://172.32.0.1/x", "http://192.169.0.1/x", "http://100.128.0.1/x", "http://[2001:4860::8888]/x", "http://[::ffff:8.8.8.8]/x"]) ok(u, p);
    ok("/custom/webhook", p); // the deployment's own routes
  });

  it("disable_loopback rejects relative URLs and loopback hosts in every spelling", () => {
    const p = { disableLoopback: true };
    bad("/custom/webhook", p, /Loopback/);
    for (const u of ["http://localhost:1/x", "http://LOCALHOST./x", "http://app.localhost/x", "http://127.0.0.1/x", "http://127.9.8.7/x",
      "http://2130706433/x", "http://[::1]/x", "http://[0:0:0:0:0:0:0:1]/x", "http://[::ffff:127.0.0.1]/x", "http://0.0.0.0/x", "http://host.docker.internal/x"]) {
      bad(u, p, /loopback|unspecified/);
    }
    ok("https://example.com/x", p);
    ok("http://128.0.0.1/x", p);
    ok("http://10.0.0.1/x", p); // private addresses allowed here, only loopback is off
  });

  it("enforces max_url_length", () => {
    const url = `https://example.com/${"a".repeat(100)}`;
    bad(url, { maxUrlLength: 50 }, /limit is 50/);
    ok(url, { maxUrlLength: url.length });
  });
});

// ---------- sender (main thread) ----------

describe("WebhookSender", { timeout: 15_000 }, () => {
  const payload = () => buildWebhookPayload(runRecord(), { messages: [] }, false);

  it("retries a 500 and then delivers, with JSON content type, static headers and webhook_sent_at", async () => {
    const rx = await new Receiver((_r, res, i) => {
      res.statusCode = i === 0 ? 500 : 200;
      res.end();
    }).start();
    try {
      const { lines, log } = quietLog();
      const sender = new WebhookSender({ headers: { "X-Static": "v1" }, backoffBaseMs: 20, log });
      const result = await sender.send(`${rx.url}/hook?token=s3cret`, payload());
      expect(result).toEqual({ delivered: true, attempts: 2, status: 200 });
      expect(rx.received).toHaveLength(2);
      for (const r of rx.received) {
        expect(r.method).toBe("POST");
        expect(r.url).toBe("/hook?token=s3cret");
        expect(r.headers["content-type"]).toBe("application/json");
        expect(r.headers["x-static"]).toBe("v1");
        expect(Date.parse(r.body.webhook_sent_at!)).not.toBeNaN();
        expect(r.body.run_id).toBe(runRecord().run_id);
      }
      expect(lines).toEqual([]);
    } finally {
      await rx.stop();
    }
  });

  it("gives up after 3 attempts on repeated 5xx and logs without the query secret", async () => {
    const rx = await new Receiver((_r, res) => {
      res.statusCode = 503;
      res.end();
    }).start();
    try {
      const { lines, log } = quietLog();
      const withUserinfo = rx.url.replace("http://", "http://hook-user:hunter2@");
      const result = await new WebhookSender({ backoffBaseMs: 10, log }).send(`${withUserinfo}/hook?token=s3cret`, payload());
      expect(result).toMatchObject({ delivered: false, attempts: 3, status: 503 });
      expect(rx.received).toHaveLength(3);
      expect(rx.received[0].headers.authorization).toBe(`Basic ${Buffer.from("hook-user:hunter2").toString("base64")}`);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/failed to call webhook http:\/\/hook-user:\*\*\*@127\.0\.0\.1:\d+\/hook\?… .*after 3 attempt/);
      expect(lines[0]).not.toContain("s3cret");
      expect(lines[0]).not.toContain("hunter2");
    } finally {
      await rx.stop();
    }
  });

  it("connects only to addresses the rule allows: names resolved and checked once, literals before the request", async () => {
    const rx = await new Receiver().start();
    const port = new URL(rx.url).port;
    const rule = { allowPrivateAddresses: false, disableLoopback: false };
    try {
      // the lookup the sender connects with: localhost resolves (through the system resolver) to loopback
      const refused = await new Promise<NodeJS.ErrnoException | null>((resolve) => guardedLookup(rule)("localhost", { all: true }, (err) => resolve(err)));
      expect(refused?.code).toBe(REFUSED_ADDRESS);
      expect(refused?.message).toMatch(/localhost resolves to (127\.0\.0\.1|::1), a loopback address/);
      const allowed = await new Promise<unknown>((resolve) => guardedLookup({ ...rule, allowPrivateAddresses: true })("localhost", {}, (_e, address) => resolve(address)));
      expect(allowed).toMatch(/^(127\.0\.0\.1|::1)$/);

      const { lines, log } = quietLog();
      const sender = new WebhookSender({ backoffBaseMs: 10, log, addressRule: rule });
      // a name the URL check cannot know is internal (this machine's host name, when it resolves to loopback)
      const name = hostname();
      const address = await lookup(name).then((a) => a.address, () => undefined);
      if (address?.startsWith("127.")) {
        const viaName = await sender.send(`http://${name}:${port}/by-name`, payload());
        expect(viaName).toMatchObject({ delivered: false, attempts: 1 }); // refused, not retried
        expect(viaName.error).toMatch(/resolves to 127\./);
      }
      const literal = await sender.send(`http://[::ffff:127.0.0.1]:${port}/literal`, payload());
      expect(literal).toMatchObject({ delivered: false, attempts: 0 });
      expect(literal.error).toMatch(/loopback address/);
      expect(rx.received).toHaveLength(0);
      expect(lines.every((l) => l.startsWith("failed to call webhook"))).toBe(true);
      // without a rule (and with one allowing private addresses) the same receiver is reached
      expect(await new WebhookSender({ addressRule: { allowPrivateAddresses: true, disableLoopback: false } }).send(`http://localhost:${port}/ok`, payload())).toMatchObject({ delivered: true });
      expect(rx.received.map((r) => r.url)).toEqual(["/ok"]);
    } finally {
      await rx.stop();
    }
  });

  it("does not retry a 4xx other than 429", async () => {
    const rx = await new Receiver((_r, res) => {
      res.statusCode = 404;
      res.end();
    }).start();
    try {
      const result = await new WebhookSender({ backoffBaseMs: 10, log: quietLog().log }).send(`${rx.url}/x`, payload());
      expect(result).toEqual({ delivered: true, attempts: 1, status: 404 });
      expect(rx.received).toHaveLength(1);
    } finally {
      await rx.stop();
    }
  });

  it("honours a small Retry-After on 429 and gives up on a large one", async () => {
    const rx = await new Receiver((r, res, i) => {
      const big = r.url === "/big";
      res.statusCode = big || i === 0 ? 429 : 200;
      res.setHeader("retry-after", big ? "3600" : "1");
      res.end();
    }).start();
    try {
      const sender = new WebhookSender({ backoffBaseMs: 10, log: quietLog().log });
      const t = Date.now();
      expect(await sender.send(`${rx.url}/small`, payload())).toEqual({ delivered: true, attempts: 2, status: 200 });
      expect(Date.now() - t).toBeGreaterThanOrEqual(950);
      const big = await sender.send(`${rx.url}/big`, payload());
      expect(big).toMatchObject({ delivered: false, attempts: 1, status: 429 });
      expect(big.error).toMatch(/Retry-After/);
    } finally {
      await rx.stop();
    }
    expect(parseRetryAfter("5")).toBe(5000);
    expect(parseRetryAfter(new Date(Date.now() + 2000).toUTCString())).toBeGreaterThan(0);
    expect(parseRetryAfter("soon")).toBeUndefined();
  });

  it("times out on a receiver that never answers, retrying within a bounded time", async () => {
    const rx = await new Receiver(() => {}).start(); // never responds
    try {
      const { lines, log } = quietLog();
      const t = Date.now();
      const result = await new WebhookSender({ requestTimeoutMs: 200, backoffBaseMs: 10, maxAttempts: 2, log }).send(`${rx.url}/slow`, payload());
      const took = Date.now() - t;
      expect(result).toMatchObject({ delivered: false, attempts: 2 });
      expect(result.error).toMatch(/timed out after 200 ms/);
      expect(rx.received).toHaveLength(2);
      expect(took).toBeGreaterThanOrEqual(400);
      expect(took).toBeLessThan(3000);
      expect(lines).toHaveLength(1);
    } finally {
      await rx.stop();
    }
  });

  it("retries network errors (connection refused)", async () => {
    const rx = await new Receiver().start();
    const url = `${rx.url}/gone`;
    await rx.stop();
    const result = await new WebhookSender({ backoffBaseMs: 10, log: quietLog().log }).send(url, payload());
    expect(result).toMatchObject({ delivered: false, attempts: 3 });
    expect(result.error).toMatch(/ECONNREFUSED/);
  });

  it("delivers relative URLs through the dispatch option and logs them as undeliverable without it", async () => {
    const calls: { path: string; headers: Record<string, string>; body: WebhookPayload }[] = [];
    const sender = new WebhookSender({
      headers: { "x-static": "v" },
      backoffBaseMs: 10,
      dispatch: async (_m, path, headers, body) => {
        calls.push({ path, headers, body: JSON.parse(body) });
        return { status: calls.length === 1 ? 502 : 200 };
      },
    });
    expect(await sender.send("/custom/webhook", payload())).toEqual({ delivered: true, attempts: 2, status: 200 });
    expect(calls[1]).toMatchObject({ path: "/custom/webhook", headers: { "x-static": "v", "content-type": "application/json" }, body: { status: "success" } });

    const { lines, log } = quietLog();
    expect(await new WebhookSender({ log }).send("/custom/webhook", payload())).toMatchObject({ delivered: false, attempts: 0 });
    expect(lines[0]).toMatch(/relative URLs cannot be delivered/);
  });
});

describe("BoundedRunner", () => {
  it("caps jobs in flight, queues up to maxQueued, drops beyond, and reports idle", async () => {
    const runner = new BoundedRunner(2, 1);
    const releases: (() => void)[] = [];
    let maxSeen = 0;
    const job = () => new Promise<void>((resolve) => {
      maxSeen = Math.max(maxSeen, runner.active);
      releases.push(resolve);
    });
    expect([runner.run(job), runner.run(job), runner.run(job), runner.run(job)]).toEqual([true, true, true, false]);
    expect([runner.active, runner.queued]).toEqual([2, 1]);
    let idle = false;
    const idleP = runner.idle().then(() => (idle = true));
    releases.shift()!();
    await new Promise((r) => setImmediate(r));
    expect([runner.active, runner.queued, idle]).toEqual([2, 0, false]);
    while (releases.length) releases.shift()!();
    await idleP;
    expect([runner.active, maxSeen, idle]).toEqual([0, 2, true]);
  });
});

// ---------- the worker thread, started for real ----------

// the worker entry compiled as the server compiles it (src/loader/runtime-modules.ts)
const WORKER_SOURCE = fileURLToPath(new URL("../workers/webhook.ts", import.meta.url));
let workerEntry = "";
let buildDir = "";

function startWorker(workerData: WebhookWorkerData): Worker {
  const w = new Worker(new URL(workerEntry), { execArgv: ["--enable-source-maps"], workerData, stderr: true });
  w.stderr!.resume();
  return w;
}

describe("webhook worker thread", { timeout: 15_000 }, () => {
  beforeAll(async () => {
    buildDir = mkdtempSync(join(tmpdir(), "troupe-webhook-entry-"));
    const built = await compileModules([WORKER_SOURCE], buildDir);
    expect(built.errors).toEqual({});
    workerEntry = built.urls[WORKER_SOURCE]!;
  }, 60_000);
  afterAll(() => rmSync(buildDir, { recursive: true, force: true }));

  it("refuses to load on the main thread", async () => {
    await expect(import("../workers/webhook.ts")).rejects.toThrow(/must not be loaded on the main thread/);
  });

  it("delivers from parentPort and from a handed-over port with the static headers, concurrently", async () => {
    const slow = await new Receiver(() => {}).start(); // never answers: must not hold up the others
    const rx = await new Receiver().start();
    const worker = startWorker({ headers: { Authorization: "Bearer static", "X-Troupe": "1" }, requestTimeoutMs: 8_000, maxAttempts: 1 });
    try {
      worker.postMessage({ type: "webhook.send", url: `${slow.url}/slow`, payload: buildWebhookPayload(runRecord({ run_id: "slow" }), undefined, false) });
      await slow.next(1);
      const t = Date.now();
      worker.postMessage({ type: "webhook.send", url: `${rx.url}/a`, payload: buildWebhookPayload(runRecord({ run_id: "from-parent" }), { n: 1 }, false) });
      const { port1, port2 } = new MessageChannel();
      worker.postMessage({ type: "webhook.port", port: port1 }, [port1]);
      port2.postMessage({ type: "webhook.send", url: `${rx.url}/b`, payload: buildWebhookPayload(runRecord({ run_id: "from-port", status: "error", error: { error: "E", message: "m" } }), undefined, false) });
      await rx.next(2);
      expect(Date.now() - t).toBeLessThan(4_000); // not queued behind the 8 s slow delivery
      port2.close();
      const byId = Object.fromEntries(rx.received.map((r) => [r.body.run_id, r]));
      expect(Object.keys(byId).sort()).toEqual(["from-parent", "from-port"]);
      for (const r of rx.received) {
        expect(r.headers.authorization).toBe("Bearer static");
        expect(r.headers["x-troupe"]).toBe("1");
        expect(r.headers["content-type"]).toBe("application/json");
        expect(Date.parse(r.body.webhook_sent_at!)).toBeGreaterThan(Date.parse(T2));
      }
      expect(byId["from-parent"]!.body.values).toEqual({ n: 1 });
      expect(byId["from-port"]!.body.error).toEqual({ error: "E", message: "m" });
      expect(slow.received).toHaveLength(1); // still pending while the others went through
    } finally {
      await worker.terminate();
      await Promise.all([slow.stop(), rx.stop()]);
    }
  });

  it("re-checks the URL policy given in workerData and skips refused URLs", async () => {
    const rx = await new Receiver().start();
    const worker = startWorker({ headers: {}, urlPolicy: policy({ allowedPorts: [1] }) });
    const stderr: string[] = [];
    worker.stderr!.on("data", (c: Buffer) => stderr.push(c.toString()));
    try {
      worker.postMessage({ type: "webhook.send", url: `${rx.url}/refused`, payload: buildWebhookPayload(runRecord(), undefined, false) });
      await new Promise<void>((resolve) => worker.stderr!.once("data", () => resolve()));
      expect(stderr.join("")).toMatch(/not sent: Webhook port \d+ is not in webhooks.url.allowed_ports/);
      expect(rx.received).toHaveLength(0);
    } finally {
      await worker.terminate();
      await rx.stop();
    }
  });

  it("WebhookWorkerHost delivers relative URLs through the main thread's dispatch and absolute ones over HTTP", async () => {
    const rx = await new Receiver().start();
    const dispatched: { path: string; headers: Record<string, string>; body: WebhookPayload }[] = [];
    let resolveDispatched!: () => void;
    const gotDispatch = new Promise<void>((r) => (resolveDispatched = r));
    const host = new WebhookWorkerHost({
      entryUrl: workerEntry,
      headers: { "x-static": "h" },
      dispatch: async (_m, path, headers, body) => {
        dispatched.push({ path, headers, body: JSON.parse(body) });
        resolveDispatched();
        return { status: 200 };
      },
    });
    try {
      host.send("/custom/webhook", buildWebhookPayload(runRecord(), { messages: [] }, false));
      const shardPort = host.connectPort();
      shardPort.postMessage({ type: "webhook.send", url: `${rx.url}/abs`, payload: buildWebhookPayload(runRecord(), undefined, true) });
      await Promise.all([gotDispatch, rx.next(1)]);
      shardPort.close();
      expect(dispatched).toHaveLength(1);
      expect(dispatched[0]).toMatchObject({ path: "/custom/webhook", headers: { "x-static": "h", "content-type": "application/json" }, body: { status: "success", values: { messages: [] } } });
      expect(rx.received[0]!.headers["x-static"]).toBe("h");
      expect(rx.received[0]!.body).not.toHaveProperty("values");
    } finally {
      await host.terminate();
      await rx.stop();
    }
  });

  it("WebhookWorkerHost starts its worker only when a shard port first carries a webhook, losing none queued behind it", async () => {
    const rx = await new Receiver().start();
    const host = new WebhookWorkerHost({ entryUrl: workerEntry, headers: {} }).unref();
    try {
      const a = host.connectPort();
      const b = host.connectPort();
      await new Promise((r) => setTimeout(r, 200));
      expect(host.started).toBe(false);
      // a burst on one port: the first message starts the worker, the rest must follow the port
      for (let i = 0; i < 20; i++) a.postMessage({ type: "webhook.send", url: `${rx.url}/a${i}`, payload: buildWebhookPayload(runRecord(), undefined, true) });
      await rx.next(20);
      expect(host.started).toBe(true);
      // a port held since before the start was handed over too, and one made afterwards works
      b.postMessage({ type: "webhook.send", url: `${rx.url}/b`, payload: buildWebhookPayload(runRecord(), undefined, true) });
      const c = host.connectPort();
      c.postMessage({ type: "webhook.send", url: `${rx.url}/c`, payload: buildWebhookPayload(runRecord(), undefined, true) });
      await rx.next(22);
      await new Promise((r) => setTimeout(r, 200)); // nothing delivered twice
      expect(rx.received.map((r) => r.url).sort()).toEqual([...Array.from({ length: 20 }, (_, i) => `/a${i}`), "/b", "/c"].sort());
      for (const p of [a, b, c]) p.close();
    } finally {
      await host.terminate();
      await rx.stop();
    }
  });
});
