// Run-completion webhooks: payload shape, URL policy, the retry schedule, signatures, the sender
// and the outbox deliverer against a real HTTP receiver and real LMDB files, and the dedicated
// worker thread started for real.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { MessageChannel, Worker } from "node:worker_threads";
import { mkdtempSync, rmSync } from "node:fs";
import { lookup } from "node:dns/promises";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Webhook } from "standardwebhooks";
import { buildWebhookPayload, stampSentAt, webhookBody, type WebhookPayload } from "../src/webhooks/payload.ts";
import { validateWebhookUrl, type WebhookUrlPolicy } from "../src/webhooks/url-policy.ts";
import { parseRetryAfter, WebhookSender } from "../src/webhooks/sender.ts";
import { guardedLookup, REFUSED_ADDRESS } from "../src/webhooks/address-check.ts";
import { WebhookWorkerHost } from "../src/webhooks/host.ts";
import { compileModules } from "../src/loader/compile-modules.ts";
import type { WebhookWorkerData } from "../src/webhooks/messages.ts";
import { BoundedRunner } from "../src/webhooks/limiter.ts";
import { judgeAttempt, RETRY_DELAYS_MS } from "../src/webhooks/retry-schedule.ts";
import { DeliverySigner, signingSecretProblem } from "../src/webhooks/signing.ts";
import { WebhookCounters } from "../src/webhooks/counters.ts";
import { OutboxDeliverer, type DelivererOptions } from "../src/webhooks/deliverer.ts";
import { newWebhookDelivery, webhookDeliveryOf, type DeliveryKey } from "../src/webhooks/outbox.ts";
import { lmdbStoragePort } from "../src/storage/lmdb/adapter.ts";
import { openStorage, type Storage } from "../src/storage/env.ts";
import { waitUntil } from "./helpers/wait.ts";
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
    kwargs: {
      input: { messages: [] },
      config: { configurable: {} },
      stream_mode: ["values"],
      webhook: "http://example.com/hook",
      temporary: false,
      subgraphs: false,
      resumable: false,
    },
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
      "run_id",
      "thread_id",
      "assistant_id",
      "metadata",
      "status",
      "kwargs",
      "multitask_strategy",
      "created_at",
      "updated_at",
      "run_started_at",
      "run_ended_at",
      "values",
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
    for (const u of [
      "http://127.0.0.1/x",
      "http://2130706433/x",
      "http://0x7f.1/x",
      "http://localhost/x",
      "http://a.localhost/x",
      "http://[::1]/x",
      "http://10.1.2.3/x",
      "http://172.16.0.1/x",
      "http://172.31.255.255/x",
      "http://192.168.1.1/x",
      "http://100.64.0.1/x",
      "http://169.254.169.254/latest/meta-data",
      "http://0.0.0.0/x",
      "http://[::]/x",
      "http://[fd00::1]/x",
      "http://[fc00::1]/x",
      "http://[fe80::1]/x",
      "http://[::ffff:10.0.0.1]/x",
      "http://[::ffff:169.254.169.254]/x",
      "http://[::ffff:127.0.0.1]/x",
      "http://[::127.0.0.1]/x",
      "http://[64:ff9b::a9fe:a9fe]/x",
      "http://[2002:c0a8:101::1]/x",
      "http://host.docker.internal/x",
    ]) {
      bad(u, p, /is a (loopback|private|link-local|unspecified) address, refused by the URL policy \(webhooks\.url\.allow_private_addresses\)/);
    }
    for (const u of [
      "https://example.com/x",
      "http://8.8.8.8/x",
      "http://172.32.0.1/x",
      "http://192.169.0.1/x",
      "http://100.128.0.1/x",
      "http://[2001:4860::8888]/x",
      "http://[::ffff:8.8.8.8]/x",
    ])
      ok(u, p);
    ok("/custom/webhook", p); // the deployment's own routes
  });

  it("disable_loopback rejects relative URLs and loopback hosts in every spelling", () => {
    const p = { disableLoopback: true };
    bad("/custom/webhook", p, /Loopback/);
    for (const u of [
      "http://localhost:1/x",
      "http://LOCALHOST./x",
      "http://app.localhost/x",
      "http://127.0.0.1/x",
      "http://127.9.8.7/x",
      "http://2130706433/x",
      "http://[::1]/x",
      "http://[0:0:0:0:0:0:0:1]/x",
      "http://[::ffff:127.0.0.1]/x",
      "http://0.0.0.0/x",
      "http://host.docker.internal/x",
    ]) {
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

describe("WebhookSender (one attempt)", { timeout: 15_000 }, () => {
  const body = () => webhookBody(buildWebhookPayload(runRecord(), undefined, false), '{"messages":[]}', T2);

  it("POSTs the JSON body with its content type, the static headers and the attempt's headers", async () => {
    const rx = await new Receiver((_r, res) => {
      res.statusCode = 503;
      res.setHeader("retry-after", "7");
      res.end();
    }).start();
    try {
      const sender = new WebhookSender({ headers: { "X-Static": "v1" } });
      const result = await sender.attempt(`${rx.url}/hook?token=s3cret`, body(), { "webhook-id": "d1" });
      expect(result).toEqual({ status: 503, retryAfterMs: 7_000 });
      const [r] = rx.received;
      expect(r!.method).toBe("POST");
      expect(r!.url).toBe("/hook?token=s3cret");
      expect(r!.headers["content-type"]).toBe("application/json");
      expect(r!.headers["x-static"]).toBe("v1");
      expect(r!.headers["webhook-id"]).toBe("d1");
      expect(r!.raw).toBe(body());
    } finally {
      await rx.stop();
    }
    expect(parseRetryAfter("5")).toBe(5000);
    expect(parseRetryAfter(new Date(Date.now() + 2000).toUTCString())).toBeGreaterThan(0);
    expect(parseRetryAfter("soon")).toBeUndefined();
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
      const allowed = await new Promise<unknown>((resolve) =>
        guardedLookup({ ...rule, allowPrivateAddresses: true })("localhost", {}, (_e, address) => resolve(address)),
      );
      expect(allowed).toMatch(/^(127\.0\.0\.1|::1)$/);

      const sender = new WebhookSender({ addressRule: rule });
      // a name the URL check cannot know is internal (this machine's host name, when it resolves to loopback)
      const name = hostname();
      const address = await lookup(name).then(
        (a) => a.address,
        () => undefined,
      );
      if (address?.startsWith("127.")) {
        const viaName = await sender.attempt(`http://${name}:${port}/by-name`, body());
        expect(viaName).toMatchObject({ final: true, error: expect.stringMatching(/resolves to 127\./) }); // refused: not retried
      }
      const literal = await sender.attempt(`http://[::ffff:127.0.0.1]:${port}/literal`, body());
      expect(literal).toMatchObject({ final: true, error: expect.stringMatching(/loopback address/) });
      expect(rx.received).toHaveLength(0);
      // with a rule allowing private addresses the same receiver is reached
      expect(
        await new WebhookSender({ addressRule: { allowPrivateAddresses: true, disableLoopback: false } }).attempt(`http://localhost:${port}/ok`, body()),
      ).toMatchObject({ status: 200 });
      expect(rx.received.map((r) => r.url)).toEqual(["/ok"]);
    } finally {
      await rx.stop();
    }
  });

  it("times out on a receiver that never answers", async () => {
    const rx = await new Receiver(() => {}).start(); // never responds
    try {
      const t = Date.now();
      const result = await new WebhookSender({ requestTimeoutMs: 200 }).attempt(`${rx.url}/slow`, body());
      expect(result.error).toMatch(/timed out after 200 ms/);
      expect(Date.now() - t).toBeLessThan(3000);
    } finally {
      await rx.stop();
    }
  });

  it("reports network errors (connection refused)", async () => {
    const rx = await new Receiver().start();
    const url = `${rx.url}/gone`;
    await rx.stop();
    expect((await new WebhookSender().attempt(url, body())).error).toMatch(/ECONNREFUSED/);
  });

  it("delivers relative URLs through the dispatch option, and cannot without it", async () => {
    const calls: { path: string; headers: Record<string, string>; body: WebhookPayload }[] = [];
    const sender = new WebhookSender({
      headers: { "x-static": "v" },
      dispatch: async (_m, path, headers, text) => {
        calls.push({ path, headers, body: JSON.parse(text) });
        return { status: 502, headers: { "retry-after": "1" } };
      },
    });
    expect(await sender.attempt("/custom/webhook", body(), { "webhook-id": "d" })).toEqual({ status: 502, retryAfterMs: 1000 });
    expect(calls[0]).toMatchObject({
      path: "/custom/webhook",
      headers: { "x-static": "v", "webhook-id": "d", "content-type": "application/json" },
      body: { status: "success" },
    });
    expect((await new WebhookSender().attempt("/custom/webhook", body())).error).toMatch(/relative URLs cannot be delivered/);
  });
});

describe("retry schedule", () => {
  const delays = [1_000, 10_000, 100_000];

  it("delivers on 2xx, gives up on 410 at once and after the last scheduled attempt, retries anything else", () => {
    expect(judgeAttempt({ status: 204 }, 1, delays)).toEqual({ kind: "delivered" });
    expect(judgeAttempt({ status: 410 }, 1, delays)).toMatchObject({ kind: "failed" });
    for (const r of [{ status: 500 }, { status: 404 }, { status: 301 }, { error: "ECONNREFUSED" }]) {
      expect(judgeAttempt(r, 1, delays).kind).toBe("retry");
    }
    expect(judgeAttempt({ status: 500 }, 3, delays)).toMatchObject({ kind: "retry", reason: "HTTP 500" });
    expect(judgeAttempt({ status: 500 }, 4, delays)).toEqual({ kind: "failed", reason: "HTTP 500" });
    expect(judgeAttempt({ error: "timed out after 30000 ms" }, 4, delays)).toEqual({ kind: "failed", reason: "timed out after 30000 ms" });
    expect(judgeAttempt({ error: "example.com resolves to 10.0.0.1, a private address", final: true }, 1, delays)).toMatchObject({ kind: "failed" });
  });

  it("waits the schedule's next delay with ±10% jitter, or a longer Retry-After capped at the longest delay", () => {
    expect(judgeAttempt({ status: 500 }, 2, delays, () => 0)).toMatchObject({ delayMs: 9_000 });
    expect(judgeAttempt({ status: 500 }, 2, delays, () => 1)).toMatchObject({ delayMs: 11_000 });
    expect(judgeAttempt({ status: 429, retryAfterMs: 50_000 }, 1, delays, () => 0.5)).toMatchObject({ delayMs: 50_000 });
    expect(judgeAttempt({ status: 429, retryAfterMs: 10 }, 1, delays, () => 0.5)).toMatchObject({ delayMs: 1_000 });
    expect(judgeAttempt({ status: 429, retryAfterMs: 9e9 }, 1, delays, () => 0.5)).toMatchObject({ delayMs: 100_000 });
    // the documented schedule: 10 attempts over about 33 hours
    expect(RETRY_DELAYS_MS).toHaveLength(9);
    expect(RETRY_DELAYS_MS.reduce((a, b) => a + b, 0) / 3_600_000).toBeCloseTo(32.6, 1);
  });
});

describe("delivery body and signature", () => {
  it("splices the stored values JSON into the body in the reference key order", () => {
    const payload = buildWebhookPayload(runRecord({ status: "error", error: { error: "E", message: "m" } }), undefined, false);
    const text = webhookBody(payload, '{"messages":[{"content":"é"}]}', T2);
    const parsed = JSON.parse(text) as Record<string, unknown>;
    expect(Object.keys(parsed).slice(-4)).toEqual(["run_ended_at", "webhook_sent_at", "values", "error"]);
    expect(parsed).toMatchObject({ webhook_sent_at: T2, values: { messages: [{ content: "é" }] }, error: { error: "E", message: "m" } });
    expect(JSON.parse(webhookBody(buildWebhookPayload(runRecord(), undefined, true), undefined, T2))).toEqual(
      stampSentAt(buildWebhookPayload(runRecord(), undefined, true), T2),
    );
  });

  it("signs with the Standard Webhooks scheme, verifiable by the reference library", () => {
    const secret = `whsec_${Buffer.alloc(32, 7).toString("base64")}`;
    const at = new Date();
    const signed = new DeliverySigner(secret).headers("d-1", '{"a":1}', at);
    expect(signed).toMatchObject({ "webhook-id": "d-1", "webhook-timestamp": String(Math.floor(at.getTime() / 1000)) });
    expect(new Webhook(secret).verify('{"a":1}', signed)).toEqual({ a: 1 });
    expect(() => new Webhook(secret).verify('{"a":2}', signed)).toThrow(/signature/i);
    expect(new DeliverySigner(null).headers("d-1", "{}", at)).not.toHaveProperty("webhook-signature");
    expect(signingSecretProblem(secret)).toBeUndefined();
    expect(signingSecretProblem("whsec_not base64!")).toMatch(/base64/);
    expect(signingSecretProblem(`whsec_${Buffer.alloc(8).toString("base64")}`)).toMatch(/24 to 64 bytes/);
  });
});

// ---------- the outbox, delivered from a real LMDB data dir ----------

/** Each test of the enclosing describe gets a fresh data dir with its LMDB open. */
function freshStorage(prefix: string): { storage: Storage; dir: string } {
  const current = { storage: undefined as unknown as Storage, dir: "" };
  beforeEach(() => {
    current.dir = mkdtempSync(join(tmpdir(), prefix));
    current.storage = openStorage(current.dir);
  });
  afterEach(async () => {
    await current.storage.close();
    rmSync(current.dir, { recursive: true, force: true });
  });
  return current;
}

let runN = 0;
/**
 * A run that ended with a webhook to `url`, as its actor writes it: the run's record and its
 * delivery in the outbox. Returns the outbox key, the delivery and the shard's `webhook.due`.
 */
async function recordRun(storage: Storage, url: string, over: Partial<RunRecord> = {}, values?: string) {
  const run = runRecord({ run_id: `1ef0e0e0-0000-6000-8000-${String(++runN).padStart(12, "0")}`, ...over, kwargs: { ...runRecord().kwargs, webhook: url } });
  const delivery = newWebhookDelivery(run, values === undefined ? undefined : Buffer.from(values), false);
  const key: DeliveryKey = [run.thread_id, run.run_id];
  await storage.root.batch(() => {
    storage.runs.put(key, run);
    storage.webhookOutbox.put(key, delivery);
  });
  const due = { type: "webhook.due", threadId: run.thread_id, runId: run.run_id } as const;
  return { key, delivery, due };
}

describe("OutboxDeliverer", { timeout: 20_000 }, () => {
  const data = freshStorage("troupe-outbox-");

  function deliverer(over: Partial<DelivererOptions> = {}) {
    const counters = new WebhookCounters();
    const { lines, log } = quietLog();
    const d = new OutboxDeliverer({
      storage: lmdbStoragePort(data.storage),
      sender: new WebhookSender(),
      signer: new DeliverySigner(null),
      runner: new BoundedRunner(4, Infinity),
      counters,
      urlPolicy: null,
      retryDelaysMs: [50, 100],
      log,
      ...over,
    });
    return { d, counters, lines };
  }

  it("delivers a recorded delivery with its id, signature and values, then keeps only its outcome", async () => {
    const rx = await new Receiver((_r, res) => res.end()).start();
    const secret = `whsec_${Buffer.alloc(24, 1).toString("base64")}`;
    try {
      const { key, delivery } = await recordRun(data.storage, `${rx.url}/hook`, {}, '{"n":1}');
      const { d, counters } = deliverer({ signer: new DeliverySigner(secret) });
      d.due(key);
      await d.settled();
      const [r] = rx.received;
      expect(r!.headers["webhook-id"]).toBe(delivery.delivery_id);
      expect(new Webhook(secret).verify(r!.raw, r!.headers as Record<string, string>)).toMatchObject({ run_id: key[1], values: { n: 1 } });
      data.storage.root.resetReadTxn();
      expect(data.storage.webhookOutbox.get(key)).toBeUndefined();
      expect(await webhookDeliveryOf(lmdbStoragePort(data.storage).webhooks, ...key)).toMatchObject({
        delivery_id: delivery.delivery_id,
        state: "delivered",
        attempts: 1,
        next_attempt_at: null,
        last_attempt: { status_code: 200, error: null },
      });
      expect(counters.snapshot()).toEqual({ delivered: 1, failed: 0, retried: 0, attempts: 1 });
    } finally {
      await rx.stop();
    }
  });

  it("retries on its schedule, recording each failed attempt, until delivered", async () => {
    const rx = await new Receiver((_r, res, i) => {
      res.statusCode = i < 2 ? 500 : 200;
      res.end();
    }).start();
    try {
      const { key } = await recordRun(data.storage, `${rx.url}/hook?token=s3cret`);
      const { d, counters, lines } = deliverer({ retryDelaysMs: [1_000, 50] });
      d.due(key);
      // between the attempts (the next one ~1 s away), the failed one is on record
      const between = await waitUntil(
        async () => {
          data.storage.root.resetReadTxn();
          const d = await webhookDeliveryOf(lmdbStoragePort(data.storage).webhooks, ...key);
          return d?.attempts === 1 ? d : undefined;
        },
        { what: "the first attempt recorded" },
      );
      expect(between).toMatchObject({ state: "pending", last_attempt: { status_code: 500, error: "HTTP 500" } });
      expect(rx.received).toHaveLength(1);
      await d.settled();
      expect(rx.received).toHaveLength(3);
      expect(new Set(rx.received.map((r) => r.headers["webhook-id"])).size).toBe(1); // one id for every attempt
      expect(new Set(rx.received.map((r) => r.body.webhook_sent_at)).size).toBe(3); // each attempt stamped anew
      data.storage.root.resetReadTxn();
      expect(await webhookDeliveryOf(lmdbStoragePort(data.storage).webhooks, ...key)).toMatchObject({ state: "delivered", attempts: 3 });
      expect(counters.snapshot()).toEqual({ delivered: 1, failed: 0, retried: 2, attempts: 3 });
      expect(lines.join("\n")).not.toContain("s3cret");
    } finally {
      await rx.stop();
    }
  });

  it("gives up once the schedule is exhausted (and at once on 410), keeping the last outcome readable", async () => {
    const rx = await new Receiver((r, res) => {
      res.statusCode = r.url === "/gone" ? 410 : 503;
      res.end();
    }).start();
    try {
      const exhausted = await recordRun(data.storage, `${rx.url.replace("http://", "http://hook-user:hunter2@")}/busy?token=s3cret`);
      const gone = await recordRun(data.storage, `${rx.url}/gone`);
      const { d, counters, lines } = deliverer();
      d.due(exhausted.key);
      d.due(gone.key);
      await d.settled();
      data.storage.root.resetReadTxn();
      expect(await webhookDeliveryOf(lmdbStoragePort(data.storage).webhooks, ...exhausted.key)).toMatchObject({
        state: "failed",
        attempts: 3,
        last_attempt: { status_code: 503, error: "HTTP 503" },
      });
      expect(await webhookDeliveryOf(lmdbStoragePort(data.storage).webhooks, ...gone.key)).toMatchObject({
        state: "failed",
        attempts: 1,
        last_attempt: { status_code: 410 },
      });
      expect(data.storage.webhookOutbox.getCount()).toBe(0);
      expect(counters.snapshot()).toMatchObject({ delivered: 0, failed: 2, retried: 2, attempts: 4 });
      expect(lines.filter((l) => /failed to call webhook .* given up/.test(l))).toHaveLength(2);
      expect(rx.received[0]!.headers.authorization).toBe(`Basic ${Buffer.from("hook-user:hunter2").toString("base64")}`);
      // logged URLs: no query, the userinfo password masked
      expect(lines.join("\n")).toMatch(/webhook http:\/\/hook-user:\*\*\*@127\.0\.0\.1:\d+\/busy\?…/);
      expect(lines.join("\n")).not.toMatch(/s3cret|hunter2/);
    } finally {
      await rx.stop();
    }
  });

  it("carries on after a restart from the recorded attempt count and due time, with the same delivery id", async () => {
    let fail = true;
    const rx = await new Receiver((_r, res) => {
      res.statusCode = fail ? 500 : 200;
      res.end();
    }).start();
    try {
      const { key, delivery } = await recordRun(data.storage, `${rx.url}/hook`);
      const first = deliverer({ retryDelaysMs: [60_000] });
      first.d.due(key);
      const recorded = await waitUntil(
        () => {
          data.storage.root.resetReadTxn();
          const r = data.storage.webhookOutbox.get(key);
          return r?.attempts === 1 ? r : undefined;
        },
        { what: "the failed attempt recorded" },
      );
      first.d.close(); // the process dies with the retry a minute away
      expect(recorded.delivery_id).toBe(delivery.delivery_id);
      // as if that minute had passed
      await data.storage.webhookOutbox.put(key, { ...recorded, next_attempt_at: new Date(Date.now() - 1).toISOString() });
      fail = false;
      const second = deliverer({ retryDelaysMs: [60_000] });
      expect(await second.d.loadOutbox()).toBe(1);
      await second.d.settled();
      expect(rx.received.map((r) => r.headers["webhook-id"])).toEqual([delivery.delivery_id, delivery.delivery_id]);
      data.storage.root.resetReadTxn();
      expect(await webhookDeliveryOf(lmdbStoragePort(data.storage).webhooks, ...key)).toMatchObject({ state: "delivered", attempts: 2 });
    } finally {
      await rx.stop();
    }
  });

  it("gives up at once on an address the rule refuses when connecting (not retried)", async () => {
    const rx = await new Receiver().start();
    try {
      const { key } = await recordRun(data.storage, `http://[::ffff:127.0.0.1]:${new URL(rx.url).port}/internal`);
      const { d, counters } = deliverer({ sender: new WebhookSender({ addressRule: { allowPrivateAddresses: false, disableLoopback: false } }) });
      d.due(key);
      await d.settled();
      expect(rx.received).toHaveLength(0);
      data.storage.root.resetReadTxn();
      expect(await webhookDeliveryOf(lmdbStoragePort(data.storage).webhooks, ...key)).toMatchObject({
        state: "failed",
        attempts: 1,
        last_attempt: { error: expect.stringMatching(/loopback address/) },
      });
      expect(counters.snapshot()).toMatchObject({ failed: 1, retried: 0 });
    } finally {
      await rx.stop();
    }
  });

  it("does not send to a URL the policy refuses, and records why", async () => {
    const rx = await new Receiver().start();
    try {
      const { key } = await recordRun(data.storage, `${rx.url}/refused`);
      const { d, counters } = deliverer({ urlPolicy: policy({ allowedPorts: [1] }) });
      d.due(key);
      await d.settled();
      expect(rx.received).toHaveLength(0);
      data.storage.root.resetReadTxn();
      expect(await webhookDeliveryOf(lmdbStoragePort(data.storage).webhooks, ...key)).toMatchObject({
        state: "failed",
        attempts: 0,
        last_attempt: { error: expect.stringMatching(/refused: Webhook port/) },
      });
      expect(counters.snapshot().failed).toBe(1);
    } finally {
      await rx.stop();
    }
  });
});

describe("BoundedRunner", () => {
  it("caps jobs in flight, queues up to maxQueued, drops beyond, and reports idle", async () => {
    const runner = new BoundedRunner(2, 1);
    const releases: (() => void)[] = [];
    let maxSeen = 0;
    const job = () =>
      new Promise<void>((resolve) => {
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

describe("webhook worker thread", { timeout: 20_000 }, () => {
  const data = freshStorage("troupe-webhook-data-");
  beforeAll(async () => {
    buildDir = mkdtempSync(join(tmpdir(), "troupe-webhook-entry-"));
    const built = await compileModules([WORKER_SOURCE], buildDir);
    expect(built.errors).toEqual({});
    workerEntry = built.urls[WORKER_SOURCE]!;
  }, 60_000);
  afterAll(() => rmSync(buildDir, { recursive: true, force: true }));
  const record = async (url: string, over: Partial<RunRecord> = {}, values?: unknown) =>
    (await recordRun(data.storage, url, over, values === undefined ? undefined : JSON.stringify(values))).due;

  it("refuses to load on the main thread", async () => {
    await expect(import("../workers/webhook.ts")).rejects.toThrow(/must not be loaded on the main thread/);
  });

  it("delivers what the outbox held at start and what parentPort and handed-over ports announce, concurrently, with the static headers", async () => {
    const slow = await new Receiver(() => {}).start(); // never answers: must not hold up the others
    const rx = await new Receiver().start();
    const atStart = await record(`${rx.url}/at-start`, { run_id: "1ef0e0e0-0000-6000-8000-00000000a000" });
    const worker = startWorker({ dataDir: data.dir, headers: { Authorization: "Bearer static", "X-Troupe": "1" }, requestTimeoutMs: 8_000 });
    try {
      await rx.next(1);
      expect(rx.received[0]!.body.run_id).toBe(atStart.runId);
      worker.postMessage(await record(`${slow.url}/slow`));
      await slow.next(1);
      const t = Date.now();
      worker.postMessage(await record(`${rx.url}/a`, { run_id: "1ef0e0e0-0000-6000-8000-00000000a001" }, { n: 1 }));
      const { port1, port2 } = new MessageChannel();
      worker.postMessage({ type: "webhook.port", port: port1 }, [port1]);
      port2.postMessage(await record(`${rx.url}/b`, { run_id: "1ef0e0e0-0000-6000-8000-00000000a002", status: "error", error: { error: "E", message: "m" } }));
      await rx.next(3);
      expect(Date.now() - t).toBeLessThan(4_000); // not queued behind the 8 s slow delivery
      port2.close();
      const byPath = Object.fromEntries(rx.received.map((r) => [r.url, r]));
      expect(Object.keys(byPath).sort()).toEqual(["/a", "/at-start", "/b"]);
      for (const r of rx.received) {
        expect(r.headers.authorization).toBe("Bearer static");
        expect(r.headers["x-troupe"]).toBe("1");
        expect(r.headers["content-type"]).toBe("application/json");
        expect(r.headers["webhook-id"]).toMatch(/^[0-9a-f-]{36}$/);
        expect(r.headers).not.toHaveProperty("webhook-signature"); // no signing secret configured
        expect(Date.parse(r.body.webhook_sent_at!)).toBeGreaterThan(Date.parse(T2));
      }
      expect(byPath["/a"]!.body.values).toEqual({ n: 1 });
      expect(byPath["/b"]!.body.error).toEqual({ error: "E", message: "m" });
      expect(slow.received).toHaveLength(1); // still pending while the others went through
    } finally {
      await worker.terminate();
      await Promise.all([slow.stop(), rx.stop()]);
    }
  });

  it("WebhookWorkerHost delivers relative URLs through the main thread's dispatch and absolute ones over HTTP, counting them", async () => {
    const rx = await new Receiver().start();
    const dispatched: { path: string; headers: Record<string, string>; body: WebhookPayload }[] = [];
    let resolveDispatched!: () => void;
    const gotDispatch = new Promise<void>((r) => (resolveDispatched = r));
    const host = new WebhookWorkerHost({
      entryUrl: workerEntry,
      dataDir: data.dir,
      headers: { "x-static": "h" },
      dispatch: async (_m, path, headers, body) => {
        dispatched.push({ path, headers, body: JSON.parse(body) });
        resolveDispatched();
        return { status: 200 };
      },
    });
    try {
      const shardPort = host.connectPort();
      shardPort.postMessage(await record("/custom/webhook", {}, { messages: [] }));
      shardPort.postMessage(await record(`${rx.url}/abs`));
      await Promise.all([gotDispatch, rx.next(1)]);
      shardPort.close();
      expect(dispatched).toHaveLength(1);
      expect(dispatched[0]).toMatchObject({
        path: "/custom/webhook",
        headers: { "x-static": "h", "content-type": "application/json" },
        body: { status: "success", values: { messages: [] } },
      });
      expect(rx.received[0]!.headers["x-static"]).toBe("h");
      expect(rx.received[0]!.body).not.toHaveProperty("values");
      await waitUntil(() => host.counters.snapshot().delivered === 2, { what: "both deliveries counted" });
      expect(host.counters.snapshot()).toEqual({ delivered: 2, failed: 0, retried: 0, attempts: 2 });
    } finally {
      await host.terminate();
      await rx.stop();
    }
  });

  it("WebhookWorkerHost starts its worker only when a shard port first carries a webhook, delivering each once", async () => {
    const rx = await new Receiver().start();
    const host = new WebhookWorkerHost({ entryUrl: workerEntry, dataDir: data.dir, headers: {} }).unref();
    try {
      const a = host.connectPort();
      const b = host.connectPort();
      await new Promise((r) => setTimeout(r, 200));
      expect(host.started).toBe(false);
      // a burst on one port: the first message starts the worker, the rest follow the port (and
      // are in the outbox the worker reads as it starts: each must still go out once)
      const burst = [];
      for (let i = 0; i < 20; i++) burst.push(await record(`${rx.url}/a${i}`));
      for (const due of burst) a.postMessage(due);
      await rx.next(20);
      expect(host.started).toBe(true);
      // a port held since before the start was handed over too, and one made afterwards works
      b.postMessage(await record(`${rx.url}/b`));
      const c = host.connectPort();
      c.postMessage(await record(`${rx.url}/c`));
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
