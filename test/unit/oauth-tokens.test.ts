// OAuth token records through a real HTTP server (Dispatcher + uWebSockets.js on port 0) with the
// control-plane auth guard in front: ownership (404 for everyone else), secrets never returned and
// not in plaintext on disk, the spec's PATCH metadata shape and 422s, atomic default exclusivity.
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { controlPlaneAuthGuard } from "../../src/control-plane/auth/guard.ts";
import { AuthStore } from "../../src/control-plane/auth/store.ts";
import { openControlPlaneStorage, type ControlPlaneStorage } from "../../src/control-plane/storage.ts";
import { TokenCipher } from "../../src/control-plane/tokens/cipher.ts";
import { tokenRoutes } from "../../src/control-plane/tokens/routes.ts";
import { TokenStore } from "../../src/control-plane/tokens/store.ts";
import { Dispatcher } from "../../src/http/dispatch.ts";
import { buildOpenApi } from "../../src/http/openapi.ts";
import { listen, type ListeningServer } from "../../src/http/uws-server.ts";

const SUMMARY_KEYS = ["created_at", "expires_at", "id", "is_default", "provider_account_label", "provider_id", "scopes", "updated_at"];
const ENC_KEY = randomBytes(32).toString("base64");

let dir: string;
let storage: ControlPlaneStorage;
let server: ListeningServer;
let base: string;
let orgId: string;
const keys: Record<"alice" | "bob" | "carol", string> = { alice: "", bob: "", carol: "" };
const ids: Record<"alice" | "carol", { userId: string; orgId: string }> = {} as never;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "troupe-tokens-"));
  storage = openControlPlaneStorage(dir);
  const auth = new AuthStore(storage);
  const acme = await auth.createOrg("acme");
  const other = await auth.createOrg("other");
  orgId = acme.id;
  const alice = await auth.ensureUser(acme.id, "alice");
  const bob = await auth.ensureUser(acme.id, "bob");
  const carol = await auth.ensureUser(other.id, "carol");
  keys.alice = (await auth.createKey(acme.id, alice.id)).key;
  keys.bob = (await auth.createKey(acme.id, bob.id)).key;
  keys.carol = (await auth.createKey(other.id, carol.id)).key;
  ids.alice = { userId: alice.id, orgId: acme.id };
  ids.carol = { userId: carol.id, orgId: other.id };

  const d = new Dispatcher({ maxBodyBytes: 1 << 20, guards: [controlPlaneAuthGuard(storage)] });
  d.add(...tokenRoutes(storage, { encryptionKey: ENC_KEY }));
  server = await listen(d, "127.0.0.1", 0);
  base = `http://127.0.0.1:${server.port}`;
});

afterAll(async () => {
  server?.close();
  await storage?.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Res {
  status: number;
  body: any;
  text: string;
  headers: Headers;
}

async function call(method: string, path: string, opts: { key?: string | null; tenant?: string; body?: unknown; rawBody?: string } = {}): Promise<Res> {
  const headers: Record<string, string> = {};
  const key = opts.key === undefined ? keys.alice : opts.key;
  if (key) headers["x-api-key"] = key;
  if (opts.tenant !== undefined) headers["x-tenant-id"] = opts.tenant;
  let payload: string | undefined = opts.rawBody;
  if (opts.body !== undefined) payload = JSON.stringify(opts.body);
  if (payload !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(base + path, { method, headers, body: payload });
  const text = await res.text();
  return { status: res.status, text, body: text ? JSON.parse(text) : undefined, headers: res.headers };
}

const create = (body: Record<string, unknown>, key?: string) => call("POST", "/v2/auth/tokens", { body, key });
const secret = (tag: string) => `${tag}-${randomBytes(12).toString("hex")}`;

describe("OAuth token records", () => {
  it("creates a token and answers with OAuthTokenSummary only (no secret anywhere)", async () => {
    const access = secret("access");
    const refresh = secret("refresh");
    const res = await create({
      provider_id: "github",
      access_token: access,
      refresh_token: refresh,
      scopes: ["repo"],
      provider_account_label: "octo",
      expires_in_seconds: 3600,
    });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(SUMMARY_KEYS);
    expect(res.body).toMatchObject({ provider_id: "github", provider_account_label: "octo", scopes: ["repo"], is_default: true });
    const exp = Date.parse(res.body.expires_at) - Date.now();
    expect(exp).toBeGreaterThan(3500_000);
    expect(exp).toBeLessThanOrEqual(3600_000);
    expect(res.text).not.toContain(access);
    expect(res.text).not.toContain(refresh);

    for (const r of [
      await call("GET", "/v2/auth/tokens"),
      await call("GET", `/v2/auth/tokens/${res.body.id}`),
      await call("PATCH", `/v2/auth/tokens/${res.body.id}/metadata`, { body: {} }),
    ]) {
      expect(r.status).toBe(200);
      expect(r.text).not.toContain(access);
      expect(r.text).not.toContain(refresh);
    }
    // the secret is kept (sealed) and can be opened server-side with the same key only
    const owner = ids.alice;
    expect(new TokenStore(storage, new TokenCipher(Buffer.from(ENC_KEY, "base64"))).readSecrets(owner, res.body.id)).toEqual({
      access_token: access,
      refresh_token: refresh,
    });
    expect(() => new TokenStore(storage, new TokenCipher(randomBytes(32))).readSecrets(owner, res.body.id)).toThrow(/another encryption key/);
  });

  it("stores secrets encrypted: the LMDB file holds the label but not the tokens", async () => {
    const access = secret("plain-access");
    const refresh = secret("plain-refresh");
    const label = secret("label");
    expect((await create({ provider_id: "disk", access_token: access, refresh_token: refresh, provider_account_label: label })).status).toBe(201);
    await storage.root.flushed;
    const bytes = readFileSync(join(dir, "control-plane.mdb"));
    expect(bytes.includes(Buffer.from(label))).toBe(true); // the search works on this file
    expect(bytes.includes(Buffer.from(access))).toBe(false);
    expect(bytes.includes(Buffer.from(refresh))).toBe(false);
  });

  it("lists (with provider filter), gets, checks existence and deletes", async () => {
    const a = (await create({ provider_id: "slack", access_token: secret("a") })).body;
    const b = (await create({ provider_id: "slack", access_token: secret("b"), is_default: false })).body;
    const c = (await create({ provider_id: "notion", access_token: secret("c"), expires_at: "2030-01-02T03:04:05Z" })).body;
    expect(c.expires_at).toBe("2030-01-02T03:04:05.000Z");
    const all = (await call("GET", "/v2/auth/tokens")).body as { id: string }[];
    expect(all.map((t) => t.id)).toEqual(expect.arrayContaining([a.id, b.id, c.id]));
    const slack = (await call("GET", "/v2/auth/tokens?provider_id=slack")).body as { id: string; provider_id: string }[];
    expect(slack.map((t) => t.id)).toEqual([a.id, b.id]);
    expect((await call("GET", `/v2/auth/tokens/${c.id}`)).body).toEqual(c);
    expect((await call("GET", "/v2/auth/tokens/exists?provider_id=notion")).body).toEqual({ has_token: true });
    expect((await call("GET", "/v2/auth/tokens/exists?provider_id=jira")).body).toEqual({ has_token: false });
    expect((await call("GET", "/v2/auth/tokens/exists")).status).toBe(422);

    const del = await call("DELETE", `/v2/auth/tokens/${c.id}`);
    expect(del.status).toBe(204);
    expect((await call("GET", `/v2/auth/tokens/${c.id}`)).status).toBe(404);
    expect((await call("DELETE", `/v2/auth/tokens/${c.id}`)).status).toBe(404);
    expect((await call("GET", "/v2/auth/tokens/exists?provider_id=notion")).body).toEqual({ has_token: false });

    const bulk = await call("DELETE", "/v2/auth/tokens?provider_id=slack");
    expect(bulk.status).toBe(200);
    expect(bulk.body).toEqual({ deleted: 2 });
    expect((await call("GET", "/v2/auth/tokens?provider_id=slack")).body).toEqual([]);
    expect((await call("DELETE", "/v2/auth/tokens")).status).toBe(422);
  });

  it("validates create bodies", async () => {
    const missing = await create({ provider_id: "x" });
    expect(missing.status).toBe(422);
    expect(missing.body.detail).toContainEqual({ loc: ["body", "access_token"], msg: "Field required", type: "missing" });
    const both = await create({ provider_id: "x", access_token: "t", expires_at: "2030-01-01T00:00:00Z", expires_in_seconds: 5 });
    expect(both.status).toBe(422);
    expect(both.body.detail[0].loc).toEqual(["body", "expires_in_seconds"]);
    expect((await create({ provider_id: "x", access_token: "t", scopes: "repo" })).status).toBe(422);
  });

  it("PATCH /v2/auth/tokens/{id}/metadata updates label and default flag (200 OAuthTokenSummary)", async () => {
    const t = (await create({ provider_id: "gitlab", access_token: secret("g"), provider_account_label: "old", is_default: false })).body;
    await new Promise((r) => setTimeout(r, 5));
    const res = await call("PATCH", `/v2/auth/tokens/${t.id}/metadata`, { body: { provider_account_label: "new", is_default: true } });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(SUMMARY_KEYS);
    expect(res.body).toMatchObject({ id: t.id, provider_id: "gitlab", provider_account_label: "new", is_default: true, created_at: t.created_at });
    expect(Date.parse(res.body.updated_at)).toBeGreaterThan(Date.parse(t.updated_at));
    // null clears the label; absent / null is_default leaves the flag alone
    const cleared = await call("PATCH", `/v2/auth/tokens/${t.id}/metadata`, { body: { provider_account_label: null, is_default: null } });
    expect(cleared.body).toMatchObject({ provider_account_label: null, is_default: true });
    const unset = await call("PATCH", `/v2/auth/tokens/${t.id}/metadata`, { body: { is_default: false } });
    expect(unset.body).toMatchObject({ provider_account_label: null, is_default: false });
  });

  it("answers 422 HTTPValidationError for bad PATCH bodies", async () => {
    const t = (await create({ provider_id: "v", access_token: secret("v") })).body;
    const bad = await call("PATCH", `/v2/auth/tokens/${t.id}/metadata`, { body: { is_default: "yes" } });
    expect(bad.status).toBe(422);
    expect(Array.isArray(bad.body.detail)).toBe(true);
    expect(bad.body.detail[0].loc).toEqual(["body", "is_default"]);
    expect(typeof bad.body.detail[0].msg).toBe("string");
    expect(typeof bad.body.detail[0].type).toBe("string");
    const label = await call("PATCH", `/v2/auth/tokens/${t.id}/metadata`, { body: { provider_account_label: 5 } });
    expect(label.status).toBe(422);
    expect(label.body.detail[0].loc).toEqual(["body", "provider_account_label"]);
    const notObject = await call("PATCH", `/v2/auth/tokens/${t.id}/metadata`, { body: [1] });
    expect(notObject.status).toBe(422);
    const none = await call("PATCH", `/v2/auth/tokens/${t.id}/metadata`);
    expect(none.status).toBe(422);
    expect(none.body.detail).toEqual([{ loc: ["body"], msg: "Field required", type: "missing" }]);
    // the record is unchanged
    expect((await call("GET", `/v2/auth/tokens/${t.id}`)).body).toEqual(t);
  });

  it("hides tokens from everyone but their owner: 404 for get, patch and delete", async () => {
    const t = (await create({ provider_id: "private", access_token: secret("p"), provider_account_label: "mine" })).body;
    for (const who of [keys.bob, keys.carol]) {
      expect((await call("GET", `/v2/auth/tokens/${t.id}`, { key: who })).status).toBe(404);
      const p = await call("PATCH", `/v2/auth/tokens/${t.id}/metadata`, { key: who, body: { provider_account_label: "stolen" } });
      expect(p.status).toBe(404);
      expect(p.body).toEqual({ detail: `Token ${t.id} not found` });
      expect((await call("DELETE", `/v2/auth/tokens/${t.id}`, { key: who })).status).toBe(404);
      expect((await call("GET", "/v2/auth/tokens?provider_id=private", { key: who })).body).toEqual([]);
      expect((await call("GET", "/v2/auth/tokens/exists?provider_id=private", { key: who })).body).toEqual({ has_token: false });
      expect((await call("DELETE", "/v2/auth/tokens?provider_id=private", { key: who })).body).toEqual({ deleted: 0 });
    }
    // same answer as a token that never existed
    expect((await call("GET", "/v2/auth/tokens/nope", { key: keys.bob })).body).toEqual({ detail: "Token nope not found" });
    expect((await call("GET", `/v2/auth/tokens/${t.id}`)).body).toMatchObject({ provider_account_label: "mine" });
  });

  it("keeps at most one default per owner and provider, also under concurrent PATCHes", async () => {
    const mk = async (is_default: boolean, key = keys.alice, provider = "drive") =>
      (await create({ provider_id: provider, access_token: secret("d"), is_default }, key)).body.id as string;
    const t1 = await mk(true);
    const t2 = await mk(false);
    const t3 = await mk(false);
    const otherProvider = await mk(true, keys.alice, "dropbox");
    const bobs = await mk(true, keys.bob);
    const defaults = async (key = keys.alice, provider = "drive") =>
      ((await call("GET", `/v2/auth/tokens?provider_id=${provider}`, { key })).body as { id: string; is_default: boolean }[])
        .filter((t) => t.is_default)
        .map((t) => t.id);

    expect(await defaults()).toEqual([t1]);
    expect((await call("PATCH", `/v2/auth/tokens/${t2}/metadata`, { body: { is_default: true } })).body.is_default).toBe(true);
    expect(await defaults()).toEqual([t2]);
    // a new default token takes the flag over too
    const t4 = await mk(true);
    expect(await defaults()).toEqual([t4]);

    for (let round = 0; round < 5; round++) {
      const replies = await Promise.all([t1, t2, t3, t4].map((id) => call("PATCH", `/v2/auth/tokens/${id}/metadata`, { body: { is_default: true } })));
      expect(replies.every((r) => r.status === 200 && r.body.is_default === true)).toBe(true);
      const now = await defaults();
      expect(now).toHaveLength(1);
    }
    // other providers and other users are untouched
    expect(await defaults(keys.alice, "dropbox")).toEqual([otherProvider]);
    expect(await defaults(keys.bob)).toEqual([bobs]);
  });

  it("requires a valid key (401) and a matching X-Tenant-Id (403)", async () => {
    const none = await call("GET", "/v2/auth/tokens", { key: null });
    expect(none.status).toBe(401);
    expect(none.body.detail).toMatch(/X-Api-Key/);
    expect(none.headers.get("www-authenticate")).toContain("X-Api-Key");
    expect((await call("GET", "/v2/auth/tokens", { key: "trp_" + "A".repeat(43) })).status).toBe(401);
    expect((await call("GET", "/v2/auth/tokens", { key: "garbage" })).status).toBe(401);
    const wrong = await call("GET", "/v2/auth/tokens", { tenant: "other" });
    expect(wrong.status).toBe(403);
    expect(wrong.body.detail).toMatch(/X-Tenant-Id/);
    expect((await call("POST", "/v2/auth/tokens", { tenant: ids.carol.orgId, body: { provider_id: "x", access_token: "y" } })).status).toBe(403);
    expect((await call("GET", "/v2/auth/tokens", { tenant: orgId })).status).toBe(200);
    expect((await call("GET", "/v2/auth/tokens", { tenant: "acme" })).status).toBe(200);
    // Bearer is accepted as an alternative to X-Api-Key
    const bearer = await fetch(`${base}/v2/auth/tokens`, { headers: { authorization: `Bearer ${keys.alice}` } });
    expect(bearer.status).toBe(200);
  });

  it("refuses to create tokens without an encryption key (503) and documents the PATCH operation", async () => {
    const d = new Dispatcher({ maxBodyBytes: 1 << 20, guards: [controlPlaneAuthGuard(storage)] });
    const routes = tokenRoutes(storage, { encryptionKey: null });
    d.add(...routes);
    const reply = await d.dispatch({
      method: "POST",
      path: "/v2/auth/tokens",
      query: "",
      clientIp: "127.0.0.1",
      signal: new AbortController().signal,
      headers: { "x-api-key": keys.alice, "content-type": "application/json" },
      body: Buffer.from(JSON.stringify({ provider_id: "x", access_token: "y" })),
    });
    expect(reply).toMatchObject({ kind: "json", status: 503, body: { detail: expect.stringContaining("TROUPE_TOKEN_ENCRYPTION_KEY") } });
    expect(() => tokenRoutes(storage, { encryptionKey: "too-short" })).toThrow(/32 bytes/);

    const doc = buildOpenApi(routes, { title: "t", version: "0.1.0" }) as { paths: Record<string, Record<string, any>> };
    const op = doc.paths["/v2/auth/tokens/{token_id}/metadata"].patch;
    expect(op.operationId).toBe("update_token_label_v2_auth_tokens__token_id__metadata_patch");
    expect(op.requestBody.content["application/json"].schema.title).toBe("OAuthTokenUpdateRequest");
    expect(op.responses["200"].content["application/json"].schema.title).toBe("OAuthTokenSummary");
    expect(op.responses["422"]).toBeDefined();
  });
});
