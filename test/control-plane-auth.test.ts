// Organizations and API keys end to end: the first key comes from the `troupe keys` CLI (its own
// process), more keys from the control plane API; a real `troupe serve --org` process enforces them
// for the official SDK (401 without/with a revoked key, 403 for another org's key).
import { Client } from "@langchain/langgraph-sdk";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { controlPlaneAuth } from "../src/control-plane/auth/wiring.ts";
import { startControlPlane, type RunningControlPlane } from "../src/control-plane/server.ts";
import { REPO, TEST_CONFIG, startTestServer, type TestServer } from "./helpers/server.ts";

const KEY_RE = /^(trp_[A-Za-z0-9_-]{43})$/m;

function troupe(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [join(REPO, "bin/troupe.js"), ...args], { cwd: REPO, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    p.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    p.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => p.kill("SIGKILL"), 30_000);
    p.once("error", reject);
    p.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

let cpDir: string;
let cp: RunningControlPlane;
let server: TestServer;
let acmeKey: string;
let acmeId: string;
let globexKey: string;
let globexId: string;

beforeAll(async () => {
  cpDir = mkdtempSync(join(tmpdir(), "troupe-cp-auth-"));
  const acme = await troupe(["keys", "create", "--org", "acme", "--data-dir", cpDir]);
  expect(acme.code, acme.stderr).toBe(0);
  acmeKey = KEY_RE.exec(acme.stdout)![1];
  acmeId = /organization "acme" \(([0-9a-f-]{36})\)/.exec(acme.stdout)![1];
  const globex = await troupe(["keys", "create", "--org", "globex", "--user", "gina", "--data-dir", cpDir, "--json"]);
  expect(globex.code, globex.stderr).toBe(0);
  const g = JSON.parse(globex.stdout) as { key: string; org_id: string; org_name: string; user_name: string };
  expect(g).toMatchObject({ org_name: "globex", user_name: "gina" });
  globexKey = g.key;
  globexId = g.org_id;

  const auth = controlPlaneAuth(cpDir, { encryptionKey: null });
  cp = await startControlPlane({
    host: "127.0.0.1",
    port: 0,
    dataDir: cpDir,
    rateLimit: null,
    log: () => undefined,
    guards: auth.guards,
    extraRoutes: auth.extraRoutes,
    deployments: { workers: 1, rateLimit: "off", readyTimeoutMs: 60_000, args: auth.deploymentArgs },
  });
  server = await startTestServer({
    command: "serve",
    extraArgs: ["--host", "127.0.0.1", "--rate-limit", "off", "--control-plane-dir", cpDir, "--org", acmeId],
  });
}, 90_000);

afterAll(async () => {
  await server?.stop();
  server?.cleanup();
  await cp?.close();
  if (cpDir) rmSync(cpDir, { recursive: true, force: true });
});

async function api(method: string, path: string, key: string | null, body?: unknown, tenant?: string) {
  const headers: Record<string, string> = {};
  if (key) headers["x-api-key"] = key;
  if (tenant) headers["x-tenant-id"] = tenant;
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(cp.url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as any) : undefined, text };
}

const statusOf = async (p: Promise<unknown>): Promise<number> => {
  try {
    await p;
    return 200;
  } catch (err) {
    return (err as { status?: number }).status ?? -1;
  }
};

describe("troupe keys (CLI)", () => {
  it("prints a key of the documented format once and stores only its hash", async () => {
    expect(acmeKey).toMatch(/^trp_[A-Za-z0-9_-]{43}$/);
    expect(globexKey).not.toBe(acmeKey);
    await cp.storage.root.flushed;
    const bytes = readFileSync(join(cpDir, "control-plane.mdb"));
    expect(bytes.includes(Buffer.from(createHash("sha256").update(acmeKey).digest("hex")))).toBe(true);
    expect(bytes.includes(Buffer.from(acmeKey))).toBe(false);
    expect(bytes.includes(Buffer.from(acmeKey.slice(16)))).toBe(false);
  });
});

describe("control plane: orgs and API keys", () => {
  it("keeps the health check and documents public, everything else behind a key", async () => {
    expect((await api("GET", "/ok", null)).status).toBe(200);
    expect((await api("GET", "/openapi.json", null)).status).toBe(200);
    const denied = await api("GET", "/v2/api-keys", null);
    expect(denied.status).toBe(401);
    expect(denied.body.detail).toMatch(/API key/);
    expect((await api("GET", "/v2/deployments", null)).status).toBe(401);
    expect((await api("GET", "/v2/deployments", acmeKey)).status).toBe(200);
    expect((await api("GET", "/v2/deployments", acmeKey, undefined, "globex")).status).toBe(403);
    expect((await api("GET", "/v2/deployments", acmeKey, undefined, acmeId)).status).toBe(200);
  });

  it("creates keys through the API, lists them without secrets and revokes them", async () => {
    const created = await api("POST", "/v2/api-keys", acmeKey, { org: "acme", user: "bob", description: "ci" });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ org_id: acmeId, description: "ci" });
    expect(created.body.key).toMatch(/^trp_[A-Za-z0-9_-]{43}$/);
    expect(created.body.prefix).toBe(created.body.key.slice(0, 16));
    const bobKey = created.body.key as string;

    const list = await api("GET", "/v2/api-keys", bobKey);
    expect(list.status).toBe(200);
    expect((list.body as { prefix: string }[]).map((k) => k.prefix)).toEqual([acmeKey.slice(0, 16), created.body.prefix]);
    expect(list.text).not.toContain(acmeKey);
    expect(list.text).not.toContain(bobKey);
    expect(list.text).not.toContain(createHash("sha256").update(bobKey).digest("hex"));
    expect(list.body[1]).toMatchObject({ user_name: "bob", revoked_at: null });

    // keys for another existing user are refused (they would expose that user's tokens); own keys are fine
    const forOther = await api("POST", "/v2/api-keys", bobKey, { user: "default" });
    expect(forOther.status).toBe(403);
    expect(forOther.text).not.toContain("trp_");
    const own = await api("POST", "/v2/api-keys", bobKey, { user: "bob" });
    expect(own.status).toBe(201);
    expect(own.body.user_id).toBe(created.body.user_id);
    const race = await Promise.all([1, 2, 3].map(() => api("POST", "/v2/api-keys", acmeKey, { user: "newbie" })));
    expect(race.map((r) => r.status).sort()).toEqual([201, 403, 403]);

    // another org's keys cannot be minted, listed or revoked from here
    expect((await api("POST", "/v2/api-keys", acmeKey, { org: "globex" })).status).toBe(404);
    expect((await api("POST", "/v2/api-keys", acmeKey, { org: globexId })).status).toBe(404);
    expect((await api("DELETE", `/v2/api-keys/${globexKey.slice(0, 16)}`, acmeKey)).status).toBe(404);
    expect((await api("GET", "/v2/api-keys", globexKey)).body).toHaveLength(1);

    expect((await api("DELETE", `/v2/api-keys/${created.body.prefix}`, acmeKey)).status).toBe(204);
    expect((await api("GET", "/v2/api-keys", bobKey)).status).toBe(401);
    expect((await api("GET", "/v2/api-keys", acmeKey)).body[1].revoked_at).toEqual(expect.any(String));
    expect((await api("GET", "/v2/api-keys", own.body.key)).status).toBe(200); // other keys of bob still work
    expect((await api("DELETE", "/v2/api-keys/trp_nothing", acmeKey)).status).toBe(404);
  });

  it("creates organizations; the creating org may mint the new org's first key", async () => {
    const org = await api("POST", "/v2/orgs", acmeKey, { name: "initech" });
    expect(org.status).toBe(201);
    expect(Object.keys(org.body).sort()).toEqual(["created_at", "id", "name"]);
    expect((await api("POST", "/v2/orgs", globexKey, { name: "initech" })).status).toBe(409);
    const bad = await api("POST", "/v2/orgs", acmeKey, { name: "no spaces" });
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0].loc).toEqual(["body", "name"]);
    expect((await api("POST", "/v2/api-keys", globexKey, { org: "initech" })).status).toBe(404);
    const k = await api("POST", "/v2/api-keys", acmeKey, { org: "initech", user: "ivan" });
    expect(k.status).toBe(201);
    expect(k.body.org_id).toBe(org.body.id);
    const mine = await api("GET", "/v2/api-keys", k.body.key);
    expect(mine.body).toEqual([expect.objectContaining({ org_id: org.body.id, user_name: "ivan" })]);
    expect((await api("GET", "/v2/api-keys", k.body.key, undefined, "initech")).status).toBe(200);
    expect((await api("POST", "/v2/api-keys", acmeKey, { org: "initech", user: "ivan" })).status).toBe(403);
  });
});

describe("deployment server: X-Api-Key of the deployment's organization", () => {
  it("leaves /ok and /info open", async () => {
    expect((await fetch(`${server.url}/ok`)).status).toBe(200);
    expect((await fetch(`${server.url}/info`)).status).toBe(200);
  });

  it("answers 401 without a key or with an unknown one, 403 for another org's key", async () => {
    const raw = await fetch(`${server.url}/threads`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(raw.status).toBe(401);
    expect(await raw.json()).toEqual({ detail: "Missing or invalid API key" });
    expect(await statusOf(new Client({ apiUrl: server.url, apiKey: null }).threads.create())).toBe(401);
    expect(await statusOf(new Client({ apiUrl: server.url, apiKey: "trp_" + "x".repeat(43) }).threads.search())).toBe(401);
    expect(await statusOf(new Client({ apiUrl: server.url, apiKey: globexKey }).threads.create())).toBe(403);
    expect((await fetch(`${server.url}/docs`)).status).toBe(401);
  });

  it("serves the SDK with a valid key, without copying the key into run records", async () => {
    const client = new Client({ apiUrl: server.url, apiKey: acmeKey });
    const thread = await client.threads.create();
    const out = (await client.runs.wait(thread.thread_id, "echo", { input: { messages: [{ role: "user", content: "hello" }] } })) as {
      messages: { content: string }[];
    };
    expect(out.messages.at(-1)?.content).toBe("hello");
    const runs = await fetch(`${server.url}/threads/${thread.thread_id}/runs`, { headers: { "x-api-key": acmeKey } });
    expect(runs.status).toBe(200);
    const text = await runs.text();
    expect(JSON.parse(text)).toHaveLength(1);
    expect(text).not.toContain(acmeKey);
  });

  it("accepts a key created after startup at once and stops accepting a revoked one within the cache window", async () => {
    const created = await api("POST", "/v2/api-keys", acmeKey, { user: "rita" });
    expect(created.status).toBe(201);
    const client = new Client({ apiUrl: server.url, apiKey: created.body.key });
    await client.threads.search({ limit: 1 }); // first use: read from the control plane's LMDB, then cached

    expect((await api("DELETE", `/v2/api-keys/${created.body.prefix}`, acmeKey)).status).toBe(204);
    const revokedAt = Date.now();
    let status = 200;
    while (status !== 401 && Date.now() - revokedAt < 8_000) {
      status = await statusOf(client.threads.search({ limit: 1 }));
      if (status !== 401) await new Promise((r) => setTimeout(r, 100));
    }
    expect(status).toBe(401);
    expect(Date.now() - revokedAt).toBeLessThan(4_500); // 2 s cache + slack for a loaded 2-core CI machine
    // the original key is unaffected
    expect(await statusOf(new Client({ apiUrl: server.url, apiKey: acmeKey }).threads.search({ limit: 1 }))).toBe(200);
  });

  it("closes the WebSocket and SSE streams a revoked key opened within the cache window", async () => {
    const created = await api("POST", "/v2/api-keys", acmeKey, { user: "sam" });
    expect(created.status).toBe(201);
    const key = created.body.key as string;
    const thread = await new Client({ apiUrl: server.url, apiKey: key }).threads.create();
    // a protocol WebSocket (Node's WebSocket takes headers as its second argument)
    const ws = new WebSocket(`${server.url.replace("http", "ws")}/threads/${thread.thread_id}/stream/events`, {
      headers: { "x-api-key": key },
    } as unknown as string[]);
    const wsClosed = new Promise<{ code: number; reason: string }>((resolve) =>
      ws.addEventListener("close", (e) => resolve({ code: e.code, reason: e.reason })),
    );
    await new Promise((resolve, reject) => {
      ws.addEventListener("open", resolve);
      ws.addEventListener("error", reject);
    });
    // an open-ended SSE stream (the thread's stream)
    const sse = await fetch(`${server.url}/threads/${thread.thread_id}/stream`, { headers: { "x-api-key": key } });
    expect(sse.status).toBe(200);
    const sseText = (async () => {
      const decoder = new TextDecoder();
      let text = "";
      for await (const chunk of sse.body as unknown as AsyncIterable<Uint8Array>) text += decoder.decode(chunk, { stream: true });
      return text;
    })();
    const outcome = (p: Promise<unknown>) => Promise.race([p.then(() => "ended"), new Promise((r) => setTimeout(() => r("open"), 300))]);
    expect(await outcome(wsClosed)).toBe("open");
    expect(await outcome(sseText)).toBe("open");

    const revoked = await troupe(["keys", "revoke", key.slice(0, 16), "--org", "acme", "--data-dir", cpDir]);
    expect(revoked.code, revoked.stderr).toBe(0);
    const revokedAt = Date.now();
    const within = <T>(p: Promise<T>) =>
      Promise.race([p, new Promise<never>((_r, reject) => setTimeout(() => reject(new Error("still open 10 s after the revocation")), 10_000))]);
    const [closed, text] = await within(Promise.all([wsClosed, sseText]));
    expect(Date.now() - revokedAt).toBeLessThan(4_500); // one 2 s check interval + slack for a loaded 2-core CI machine
    expect(closed).toEqual({ code: 4401, reason: "API key revoked" });
    expect(text).toContain(`event: error\ndata: {"error":"Unauthorized","message":"API key revoked"}`);
  });

  it("refuses to start for an organization the control plane does not know", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "troupe-cp-auth-bad-"));
    try {
      const r = await troupe([
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--config",
        TEST_CONFIG,
        "--data-dir",
        dataDir,
        "--control-plane-dir",
        cpDir,
        "--org",
        "nope",
      ]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain("--org nope: no such organization");
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe("control plane flow with keys", () => {
  it("creates a deployment for the caller's org whose server requires that org's keys", async () => {
    // the org's projects directory: <control plane data>/projects/<org id> (packages through a link)
    const projects = join(cpDir, "projects", acmeId);
    mkdirSync(projects, { recursive: true });
    cpSync(join(REPO, "examples"), join(projects, "examples"), { recursive: true });
    symlinkSync(join(REPO, "node_modules"), join(projects, "node_modules"));
    const elsewhere = await api("POST", "/v2/deployments", acmeKey, {
      name: "keyed",
      source: "internal_source",
      source_config: {},
      source_revision_config: { langgraph_config_path: join(REPO, "examples/service.json") },
      secrets: [],
    });
    expect(elsewhere.status).toBe(422);
    const created = await api("POST", "/v2/deployments", acmeKey, {
      name: "keyed",
      source: "internal_source",
      source_config: {},
      source_revision_config: { langgraph_config_path: "examples" },
      secrets: [],
    });
    expect(created.status).toBe(201);
    const d = created.body as { id: string; url: string; latest_revision_id: string };
    expect((await api("GET", `/v2/deployments/${d.id}`, globexKey)).status).toBe(404); // tenant isolation
    const deadline = Date.now() + 90_000;
    let status = "";
    while (Date.now() < deadline) {
      const rev = await api("GET", `/v2/deployments/${d.id}/revisions/${d.latest_revision_id}`, acmeKey);
      expect(rev.status).toBe(200);
      status = rev.body.status as string;
      if (status === "DEPLOYED" || status.endsWith("FAILED")) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(status).toBe("DEPLOYED");
    expect(await statusOf(new Client({ apiUrl: d.url, apiKey: null }).threads.create())).toBe(401);
    expect(await statusOf(new Client({ apiUrl: d.url, apiKey: globexKey }).threads.create())).toBe(403);
    const client = new Client({ apiUrl: d.url, apiKey: acmeKey });
    const out = (await client.runs.wait(null, "echo", { input: { messages: [{ role: "user", content: "keyed" }] } })) as { messages: { content: string }[] };
    expect(out.messages.at(-1)?.content).toBe("keyed");
    expect((await api("DELETE", `/v2/deployments/${d.id}`, acmeKey)).status).toBeLessThan(300);
  }, 120_000);
});
