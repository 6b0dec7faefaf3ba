// Custom auth (`auth.path` → an SDK `Auth` object, reference §11) end to end: a real server with
// test/fixtures/auth/auth.ts, driven by the real SDK Client as two users. Plus the store rules
// (filters on `{...value, namespace, key}`, the 10 000-entry scan limit) on a real LMDB store,
// and the refusal to start when `auth.path` does not name an Auth object.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@langchain/langgraph-sdk";
import { loadAuth, matchesAuthFilter, MAX_SCAN, StoreAccess, type AuthRuntime } from "../src/auth/index.ts";
import { ConfigError } from "../src/config/index.ts";
import type { AuthInfo } from "../src/http/types.ts";
import { openStorage, type Storage } from "../src/storage/env.ts";
import { LmdbStore } from "../src/storage/store.ts";
import { REPO, startTestServer, type TestServer } from "./helpers/server.ts";
import { rawRequest } from "./helpers/suite.ts";

const CONFIG = join(REPO, "test/fixtures/auth/service.json");
const AUTH_FILE = join(REPO, "test/fixtures/auth/auth.ts");
const human = (content: string) => ({ messages: [{ role: "human", content }] });
/** The SDK's Run type omits `kwargs`, which the server sends (reference §2.5). */
const configurableOf = (run: object): Record<string, unknown> =>
  (run as { kwargs: { config: { configurable: Record<string, unknown> } } }).kwargs.config.configurable;

let server: TestServer;
let a: Client;
let b: Client;
let anon: Client;

const clientAs = (headers: Record<string, string>) => new Client({ apiUrl: server.url, apiKey: null, defaultHeaders: headers });

const raw = (path: string, init?: RequestInit) => rawRequest(server.url, path, init);

beforeAll(async () => {
  server = await startTestServer({ config: CONFIG, workers: 1 });
  a = clientAs({ Authorization: "Bearer user-a" });
  b = clientAs({ Authorization: "Bearer user-b" });
  anon = clientAs({});
});
afterAll(async () => {
  await server?.stop();
  server?.cleanup();
});

describe("authentication", () => {
  it("refuses requests without valid credentials with the HTTPException's status, message and headers", async () => {
    const none = await raw("/threads/search", { method: "POST" });
    expect(none.status).toBe(401);
    expect(none.body).toEqual({ detail: "Unauthorized" });
    expect(none.headers.get("www-authenticate")).toBe("Bearer");
    const wrong = await raw("/threads/search", { method: "POST", headers: { Authorization: "Bearer nobody" } });
    expect(wrong.status).toBe(401);
    await expect(anon.threads.search()).rejects.toThrow(/HTTP 401/);
  });

  it("exempts /info only: /ok and unknown routes are authenticated too", async () => {
    expect((await raw("/info")).status).toBe(200);
    expect((await raw("/info", { method: "POST" })).status).not.toBe(401);
    expect((await raw("/ok")).status).toBe(401);
    expect((await raw("/ok", { headers: { Authorization: "Bearer user-a" } })).body).toEqual({ ok: true });
    expect((await raw("/no/such/route")).status).toBe(401);
  });

  it("lets Studio requests act as the Studio user", async () => {
    const studio = clientAs({ "x-auth-scheme": "langsmith" });
    const t = await studio.threads.create();
    expect(t.metadata).toMatchObject({ owner: "langgraph-studio-user" });
    await expect(a.threads.get(t.thread_id)).rejects.toThrow(/HTTP 404/);
  });
});

describe("threads and runs", () => {
  it("persists the owner the create handler adds and hides the thread from other users", async () => {
    const t = await a.threads.create({ metadata: { topic: "secret" } });
    expect(t.metadata).toEqual({ topic: "secret", owner: "user-a" });
    expect((await a.threads.get(t.thread_id)).metadata).toEqual({ topic: "secret", owner: "user-a" });

    await expect(b.threads.get(t.thread_id)).rejects.toThrow(/HTTP 404/);
    await expect(b.threads.getState(t.thread_id)).rejects.toThrow(/HTTP 404/);
    await expect(b.threads.getHistory(t.thread_id)).rejects.toThrow(/HTTP 404/);
    await expect(b.threads.update(t.thread_id, { metadata: { topic: "mine now" } })).rejects.toThrow(/HTTP 404/);
    await expect(b.threads.copy(t.thread_id)).rejects.toThrow(/HTTP 404/);
    await expect(b.threads.delete(t.thread_id)).rejects.toThrow(/HTTP 404/);
    // a state update on someone else's thread is 403 in the reference table
    await expect(b.threads.updateState(t.thread_id, { values: { messages: [] } })).rejects.toThrow(/HTTP 403/);
    // taking over the id is a conflict, not a silent success
    await expect(b.threads.create({ threadId: t.thread_id, ifExists: "do_nothing" })).rejects.toThrow(/HTTP 409/);

    const ids = (rows: { thread_id: string }[]) => rows.map((r) => r.thread_id);
    expect(ids(await a.threads.search({ limit: 100 }))).toContain(t.thread_id);
    expect(ids(await b.threads.search({ limit: 100 }))).not.toContain(t.thread_id);
    expect(ids(await b.threads.search({ ids: [t.thread_id] }))).toEqual([]);
    expect(await b.threads.count({ metadata: { topic: "secret" } })).toBe(0);
    expect(await a.threads.count({ metadata: { topic: "secret" } })).toBe(1);
    expect((await a.threads.get(t.thread_id)).metadata).toEqual({ topic: "secret", owner: "user-a" });
  });

  it("gives runs the auth user in configurable and keeps other users off the thread's runs", async () => {
    const t = await a.threads.create();
    await expect(b.runs.wait(t.thread_id, "echo", { input: human("hi") })).rejects.toThrow(/HTTP 404/);
    await expect(b.runs.create(t.thread_id, "echo", { input: human("hi") })).rejects.toThrow(/HTTP 404/);

    const out = (await a.runs.wait(t.thread_id, "echo", { input: human("hello") })) as { messages: { content: string }[] };
    expect(out.messages.at(-1)?.content).toBe("hello");
    const [run] = await a.runs.list(t.thread_id);
    const configurable = configurableOf(run);
    expect(configurable.langgraph_auth_user_id).toBe("user-a");
    expect(configurable.user_id).toBe("user-a");
    expect(configurable.langgraph_auth_permissions).toEqual(["threads:write", "assistants:delete"]);
    expect(configurable.langgraph_auth_user).toMatchObject({
      identity: "user-a",
      display_name: "user-a",
      is_authenticated: true,
      role: "admin",
      // the WHATWG Request the authenticate callback got: method, absolute URL, body
      seen: { method: "POST", path: `/threads/${t.thread_id}/runs/wait`, host: new URL(server.url).host, body_has_input: true },
    });
    expect((await a.runs.get(t.thread_id, run.run_id)).run_id).toBe(run.run_id);

    await expect(b.runs.get(t.thread_id, run.run_id)).rejects.toThrow(/HTTP 404/);
    await expect(b.runs.join(t.thread_id, run.run_id)).rejects.toThrow(/HTTP 404/);
    await expect(b.runs.delete(t.thread_id, run.run_id)).rejects.toThrow(/HTTP 404/);
    await expect(b.runs.cancel(t.thread_id, run.run_id)).rejects.toThrow(/HTTP 404/);
    expect(await b.runs.list(t.thread_id)).toEqual([]);
    // join-stream answers in-band, as an SSE error event
    const joined = await raw(`/threads/${t.thread_id}/runs/${run.run_id}/stream`, { headers: { Authorization: "Bearer user-b" } });
    expect(joined.status).toBe(200);
    expect(String(joined.body)).toBe(`:\n\nevent: error\ndata: {"error":"Error","message":"404: Thread not found"}\n\n`); // ":" opens the stream at once
    expect(await a.runs.list(t.thread_id)).toHaveLength(1);
  });

  it("keeps a user_id the run config sets and owns threads created by a run", async () => {
    const threadId = crypto.randomUUID();
    await b.runs.wait(threadId, "echo", { input: human("x"), ifNotExists: "create", config: { configurable: { user_id: "custom" } } });
    const t = await b.threads.get(threadId);
    expect(t.metadata).toMatchObject({ owner: "user-b" });
    await expect(a.threads.get(threadId)).rejects.toThrow(/HTTP 404/);
    const [run] = await b.runs.list(threadId);
    const configurable = configurableOf(run);
    expect(configurable.user_id).toBe("custom");
    expect(configurable.langgraph_auth_user_id).toBe("user-b");
  });
});

describe("thread-centric protocol", () => {
  it("creates runs as their user and hides other users' threads from commands and streams", async () => {
    const mine = a.threads.stream({ assistantId: "echo" });
    await mine.run.start({ input: human("mine") });
    await mine.values;
    const tid = mine.threadId;
    expect((await a.threads.get(tid)).metadata).toMatchObject({ owner: "user-a" });
    const asB = { "content-type": "application/json", Authorization: "Bearer user-b" };
    const st = await raw(`/threads/${tid}/commands`, {
      method: "POST",
      headers: asB,
      body: JSON.stringify({ id: 1, method: "state.get", params: { namespace: [] } }),
    });
    expect(st.body).toMatchObject({ type: "error", error: "invalid_argument", message: expect.stringContaining("not found") });
    const events = await raw(`/threads/${tid}/stream/events`, { method: "POST", headers: asB, body: JSON.stringify({ channels: ["values"] }) });
    expect(events.status).toBe(404);
    const none = await raw(`/threads/${tid}/commands`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ id: 1, method: "state.get" }),
    });
    expect(none.status).toBe(401);
    // B cannot start a run on A's thread either (the run filter hides it: run.start would create it)
    const start = await raw(`/threads/${tid}/commands`, {
      method: "POST",
      headers: asB,
      body: JSON.stringify({ id: 2, method: "run.start", params: { assistant_id: "echo", input: human("theirs") } }),
    });
    expect((start.body as { type: string }).type).toBe("error");
    expect((await a.threads.getState(tid)).values).toMatchObject({ messages: [{ content: "mine" }, { content: "mine" }] });
    await mine.close();
  });
});

describe("assistants", () => {
  it("filters assistants by owner; a handler returning false answers 403", async () => {
    const mine = await b.assistants.create({ graphId: "echo", metadata: { team: "blue" }, name: "b's" });
    expect(mine.metadata).toEqual({ team: "blue", owner: "user-b" });
    await expect(a.assistants.get(mine.assistant_id)).rejects.toThrow(/HTTP 404/);
    await expect(a.assistants.update(mine.assistant_id, { name: "stolen" })).rejects.toThrow(/HTTP 404/);
    const names = (rows: { name: string }[]) => rows.map((r) => r.name);
    expect(names(await b.assistants.search({ limit: 100 }))).toEqual(["b's"]);
    expect(names(await a.assistants.search({ limit: 100 }))).not.toContain("b's");
    // the default assistants have no owner, so they are filtered out too
    await expect(b.assistants.get("echo")).rejects.toThrow(/HTTP 404/);

    // user-b lacks the permission the delete handler checks: false → 403
    await expect(b.assistants.delete(mine.assistant_id)).rejects.toThrow(/HTTP 403/);
    expect((await b.assistants.get(mine.assistant_id)).name).toBe("b's");
    const theirs = await a.assistants.create({ graphId: "echo", name: "a's" });
    await a.assistants.delete(theirs.assistant_id);
    await expect(a.assistants.get(theirs.assistant_id)).rejects.toThrow(/HTTP 404/);
  });

  it("sends an HTTPException thrown by a handler with its exact status, message and headers", async () => {
    const res = await raw("/runs/crons", {
      method: "POST",
      headers: { Authorization: "Bearer user-a", "content-type": "application/json" },
      body: JSON.stringify({ assistant_id: "echo", schedule: "*/5 * * * *" }),
    });
    expect(res.status).toBe(418);
    expect(res.body).toEqual({ detail: "No crons for you" });
    expect(res.headers.get("x-auth-reason")).toBe("teapot");
  });
});

describe("store over HTTP", () => {
  it("applies handler changes on put and filters every store route by namespace", async () => {
    await a.store.putItem(["user-a", "notes"], "n1", { text: "a's note" });
    await b.store.putItem(["user-b", "notes"], "n1", { text: "b's note" });
    expect((await a.store.getItem(["user-a", "notes"], "n1"))?.value).toEqual({ text: "a's note", written_by: "user-a" });

    await expect(b.store.getItem(["user-a", "notes"], "n1")).rejects.toThrow(/HTTP 404/);
    await expect(b.store.putItem(["user-a", "notes"], "n2", { text: "planted" })).rejects.toThrow(/HTTP 403/);
    await expect(b.store.deleteItem(["user-a", "notes"], "n1")).rejects.toThrow(/HTTP 404/);
    await expect(b.store.deleteItem(["user-a", "notes"], "absent")).rejects.toThrow(/HTTP 403/);
    expect(await a.store.getItem(["user-a", "notes"], "n2")).toBeNull();

    const seen = (await b.store.searchItems([], { limit: 100 })).items.map((i) => i.namespace);
    expect(seen).toEqual([["user-b", "notes"]]);
    expect((await b.store.listNamespaces()).namespaces).toEqual([["user-b", "notes"]]);
    expect((await a.store.listNamespaces({ maxDepth: 1 })).namespaces).toEqual([["user-a"]]);
  });
});

describe("store rules on a real LMDB store", () => {
  let dir: string;
  let storage: Storage;
  let runtime: AuthRuntime;
  let access: StoreAccess;
  const userB: AuthInfo = {
    identity: "user-b",
    permissions: [],
    user: { identity: "user-b", permissions: [], is_authenticated: true, display_name: "user-b" },
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "troupe-auth-store-"));
    storage = openStorage(dir);
    runtime = await loadAuth({ filePath: AUTH_FILE, exportName: "auth" }, { configPath: CONFIG, studioHeader: true });
    const store = new LmdbStore(storage);
    access = new StoreAccess(runtime, store);
    const items = Array.from({ length: MAX_SCAN + 5 }, (_, i) => ({ namespace: ["user-a", "bulk"], key: `k${i}`, value: { i } }));
    await store.write(items);
    await store.write([{ namespace: ["user-b", "few"], key: "only", value: { i: -1 } }]);
  });
  afterAll(async () => {
    await storage?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("refuses a filtered search that would scan more than 10 000 entries", async () => {
    const op = { namespacePrefix: ["user-a"], limit: 10, offset: 0 };
    await expect(access.search(userB, op)).rejects.toThrow("Authenticated store query exceeded maximum scan limit. Narrow the namespace or filters.");
    // the same scan without an authenticated user is not limited
    expect(await access.search(undefined, op)).toHaveLength(10);
    // a narrow namespace stays under the limit
    expect((await access.search(userB, { namespacePrefix: ["user-b"], limit: 10, offset: 0 })).map((r) => r.key)).toEqual(["only"]);
  });

  it("ranks a filtered search with a query when the store has a semantic index", async () => {
    const indexed = new LmdbStore(storage, undefined, {
      dims: 26,
      fields: ["text"],
      embed: { filePath: join(REPO, "test/fixtures/store-index/embed.ts"), exportName: "embed" },
    });
    await indexed.write([
      { namespace: ["user-b", "notes"], key: "car", value: { text: "car engine" } },
      { namespace: ["user-b", "notes"], key: "apple", value: { text: "apple pie" } },
    ]);
    const ranked = await new StoreAccess(runtime, indexed).search(userB, { namespacePrefix: ["user-b", "notes"], query: "apple", limit: 10, offset: 0 });
    expect(ranked.map((r) => r.key)).toEqual(["apple", "car"]);
    expect((ranked[0] as { score?: number }).score).toBeGreaterThan((ranked[1] as { score?: number }).score as number);
  });

  it("matches the filter forms of the reference", () => {
    const md = { owner: "u1", tags: ["x", "y"] };
    expect(matchesAuthFilter({ owner: "u1" }, md)).toBe(true);
    expect(matchesAuthFilter({ owner: { $eq: "u1" } }, md)).toBe(true);
    expect(matchesAuthFilter({ owner: { $eq: "u2" } }, md)).toBe(false);
    expect(matchesAuthFilter({ tags: { $contains: "x" } }, md)).toBe(true);
    expect(matchesAuthFilter({ tags: { $contains: ["x", "y"] } }, md)).toBe(true);
    expect(matchesAuthFilter({ tags: { $contains: ["x", "z"] } }, md)).toBe(false);
    expect(matchesAuthFilter({ owner: { $contains: "u1" } }, md)).toBe(false);
    expect(matchesAuthFilter({ owner: "u1", tags: { $contains: "y" } }, md)).toBe(true);
    expect(matchesAuthFilter({ missing: "u1" }, md)).toBe(false);
    expect(matchesAuthFilter(undefined, md)).toBe(true);
  });
});

describe("startup", () => {
  it("refuses to start when auth.path does not name an Auth instance", async () => {
    await expect(loadAuth({ filePath: AUTH_FILE, exportName: "notAuth" }, { configPath: CONFIG, studioHeader: true })).rejects.toThrow(ConfigError);
    const dataDir = mkdtempSync(join(tmpdir(), "troupe-auth-bad-"));
    try {
      await expect(startTestServer({ config: join(REPO, "test/fixtures/auth/service-not-auth.json"), dataDir, workers: 1 })).rejects.toThrow(
        /auth\.path: export "notAuth" of .*auth\.ts is not an Auth instance/,
      );
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
