// Security hardening (issue 16) of webhooks and run config on a real `troupe serve`: the default
// URL policy refuses internal destinations, by address literal at run creation (422) and by the
// address a name resolves to when the webhook is sent (SSRF through DNS); relative URLs to the
// deployment's own routes still work; credentials in request headers are not copied into run
// config, checkpoints or webhook payloads; URLs with userinfo are logged with the password masked.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { lookup } from "node:dns/promises";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@langchain/langgraph-sdk";
import { REPO, startTestServer, type TestServer } from "./helpers/server.ts";

const human = (content: string) => ({ messages: [{ role: "human", content }] });
let server: TestServer;
let client: Client;
let receiver: Server;
let port: number;
let dir: string;
const received: string[] = [];

async function until<T>(fn: () => T | undefined | Promise<T | undefined>, what: string, ms = 15_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

beforeAll(async () => {
  receiver = createServer((req, res) => {
    received.push(req.url ?? "");
    req.resume();
    res.end("ok");
  });
  await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
  port = (receiver.address() as AddressInfo).port;
  // the receiver's port is allowed, so what refuses it below is its address, not its port
  dir = mkdtempSync(join(tmpdir(), "troupe-security-webhooks-"));
  const config = join(dir, "service.json");
  writeFileSync(
    config,
    JSON.stringify({
      graphs: { echo: join(REPO, "examples/echo.ts:graph") },
      http: { app: join(REPO, "test/fixtures/custom-app/app.ts:app"), configurable_headers: { includes: ["x-*", "user-agent", "x-tenant-token"] } },
      webhooks: { url: { allowed_ports: [443, 80, port] } },
      env: {},
    }),
  );
  server = await startTestServer({
    command: "serve",
    config,
    dataDir: join(dir, "data"),
    workers: 1,
    extraArgs: ["--host", "127.0.0.1", "--rate-limit", "off"],
  });
  client = new Client({ apiUrl: server.url, apiKey: null });
});
afterAll(async () => {
  await server?.stop();
  receiver?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("webhook destinations on troupe serve", () => {
  it("refuses internal addresses and other ports at run creation with 422", async () => {
    const t = await client.threads.create();
    for (const url of [
      `http://127.0.0.1:${port}/x`,
      `http://localhost:${port}/x`,
      `http://[::ffff:127.0.0.1]:${port}/x`,
      `http://[::1]:${port}/x`,
      "http://10.0.0.5/x",
      "http://192.168.1.1/x",
      "http://169.254.169.254/latest/meta-data",
      "http://[fd00::1]/x",
      "http://0.0.0.0/x",
      "https://example.com:8443/x",
    ]) {
      await expect(client.runs.create(t.thread_id, "echo", { input: human("x"), webhook: url }), url).rejects.toThrow(/HTTP 422/);
    }
    const res = await fetch(`${server.url}/threads/${t.thread_id}/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ assistant_id: "echo", input: human("x"), webhook: `http://127.0.0.1:${port}/x` }),
    });
    expect(res.status).toBe(422);
    expect(await res.json()).toEqual({
      detail: [{ loc: ["body", "webhook"], msg: expect.stringMatching(/127\.0\.0\.1 is a loopback address, refused by the URL policy/), type: "value_error" }],
    });
    expect(received).toEqual([]);
  });

  it("does not deliver to a name that resolves to an internal address (checked at connect time)", async () => {
    const name = hostname(); // on this VM it resolves to 127.0.0.1 from /etc/hosts, like the issue's `vm`
    const { address } = await lookup(name);
    expect(address, `${name} must resolve to a loopback or private address for this test`).toMatch(/^(127\.|10\.|192\.168\.|172\.(1[6-9]|2\d|3[01])\.)/);
    const t = await client.threads.create();
    await client.runs.wait(t.thread_id, "echo", { input: human("x"), webhook: `http://${name}:${port}/by-name` });
    const line = await until(
      () =>
        server
          .output()
          .split("\n")
          .find((l) => l.includes("/by-name")),
      "the refusal in the log",
    );
    expect(line).toMatch(
      new RegExp(`failed to call webhook http://${name}:${port}/by-name for run .* resolves to ${address.replace(/\./g, "\\.")}, a (loopback|private) address`),
    );
    expect(received).toEqual([]);
  });

  it("still delivers relative URLs to the deployment's own routes", async () => {
    const t = await client.threads.create();
    await client.runs.wait(t.thread_id, "echo", { input: human("relative"), webhook: "/custom/webhook" });
    const hooks = await until(async () => {
      const list = (await (await fetch(`${server.url}/custom/webhooks`)).json()) as { thread_id: string }[];
      return list.find((h) => h.thread_id === t.thread_id);
    }, "the in-process webhook");
    expect(hooks).toMatchObject({ status: "success" });
  });
});

describe("credentials in request headers", () => {
  it("are not copied into run config, checkpoints or webhook payloads unless named in includes", async () => {
    const secrets = {
      Authorization: "Bearer authz-secret-1",
      Cookie: "session=cookie-secret-2",
      "X-Auth-Token": "token-secret-3",
      "X-Client-Secret": "client-secret-4",
      "X-Api-Key": "key-secret-5",
      "X-Db-Password": "password-secret-6",
    };
    const caller = new Client({
      apiUrl: server.url,
      apiKey: null,
      defaultHeaders: { ...secrets, "X-Request-Source": "web", "X-Tenant-Token": "named-in-includes" },
    });
    const t = await caller.threads.create();
    await caller.runs.wait(t.thread_id, "echo", { input: human("headers"), webhook: "/custom/webhook" });
    const [run] = await caller.runs.list(t.thread_id);
    const configurable = (run as unknown as { kwargs: { config: { configurable: Record<string, unknown> } } }).kwargs.config.configurable;
    expect(configurable["x-request-source"]).toBe("web");
    expect(configurable["x-tenant-token"]).toBe("named-in-includes"); // the operator's explicit choice
    const history = JSON.stringify(await caller.threads.getHistory(t.thread_id));
    expect(history).toContain("x-request-source");
    const hook = await until(async () => {
      const list = (await (await fetch(`${server.url}/custom/webhooks`)).json()) as { thread_id: string }[];
      return list.find((h) => h.thread_id === t.thread_id);
    }, "the webhook payload");
    for (const [where, text] of [
      ["run", JSON.stringify(run)],
      ["checkpoints", history],
      ["webhook", JSON.stringify(hook)],
    ]) {
      for (const value of Object.values(secrets)) expect(text, `${value} in ${where}`).not.toContain(value);
    }
  });
});

describe("logs", () => {
  it("mask the password of a webhook URL with userinfo", async () => {
    const t = await client.threads.create();
    await client.runs.wait(t.thread_id, "echo", { input: human("x"), webhook: "https://hook-user:hunter2@troupe-test.invalid/hook?token=q" });
    const line = await until(
      () =>
        server
          .output()
          .split("\n")
          .find((l) => l.includes("troupe-test.invalid")),
      "the delivery failure in the log",
    );
    expect(line).toContain("failed to call webhook https://hook-user:***@troupe-test.invalid/hook?…");
    expect(server.output()).not.toContain("hunter2");
  });
});
