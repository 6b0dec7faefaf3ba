// Run-completion webhooks end to end: real server, real local HTTP receiver.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Client } from "@langchain/langgraph-sdk";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO, startTestServer, type TestServer } from "./helpers/server.ts";

let server: TestServer;
let client: Client;
let receiver: Server;
let receiverUrl: string;
const received: { path: string; headers: Record<string, unknown>; body: Record<string, unknown> }[] = [];

beforeAll(async () => {
  receiver = createServer((req, res) => {
    let data = "";
    req.on("data", (d) => (data += d));
    req.on("end", () => {
      received.push({ path: req.url ?? "", headers: req.headers, body: JSON.parse(data) as Record<string, unknown> });
      res.statusCode = req.url?.startsWith("/gone") ? 410 : 200;
      res.end("ok");
    });
  });
  await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  server = await startTestServer();
  client = new Client({ apiUrl: server.url, apiKey: null });
});
afterAll(async () => {
  await server?.stop();
  server?.cleanup();
  receiver?.close();
});

async function until<T>(fn: () => T | undefined | Promise<T | undefined>, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("webhooks", () => {
  it("posts the final run to the webhook after a successful thread run", async () => {
    const t = await client.threads.create();
    await client.runs.wait(t.thread_id, "echo", {
      input: { messages: [{ role: "human", content: "hook" }] },
      webhook: `${receiverUrl}/done?token=s3cret`,
      metadata: { m: 1 },
    });
    const hit = await until(() => received.find((r) => r.body.thread_id === t.thread_id));
    expect(hit.path).toBe("/done?token=s3cret");
    expect(hit.headers["content-type"]).toContain("application/json");
    expect(hit.body.status).toBe("success");
    expect(hit.body.metadata).toMatchObject({ m: 1 });
    expect(hit.body.values).toBeDefined();
    for (const k of ["run_id", "assistant_id", "created_at", "updated_at", "run_started_at", "run_ended_at", "webhook_sent_at", "kwargs", "multitask_strategy"])
      expect(hit.body).toHaveProperty(k);
  });

  it("reports failures with an error object, also for stateless runs", async () => {
    const r = await fetch(`${server.url}/runs/wait`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ assistant_id: "error", input: {}, webhook: `${receiverUrl}/failed` }),
    });
    await r.text();
    const hit = await until(() => received.find((x) => x.path === "/failed"));
    expect(hit.body.status).toBe("error");
    expect(hit.body.error).toEqual({ error: "CustomError", message: "Boo!" });
    expect(hit.body.values).toBeUndefined();
  });

  it("carries a delivery id, unsigned without a signing secret, and shows each run's delivery outcome", async () => {
    const t = await client.threads.create();
    const finished = async (content: string, webhook?: string) => {
      const run = await client.runs.create(t.thread_id, "echo", { input: { messages: [{ role: "human", content }] }, webhook });
      await client.runs.join(t.thread_id, run.run_id);
      return run;
    };
    const ok = await finished("seen", `${receiverUrl}/seen`);
    const hit = await until(() => received.find((r) => r.path === "/seen"));
    expect(hit.headers["webhook-id"]).toMatch(/^[0-9a-f-]{36}$/);
    expect(Number(hit.headers["webhook-timestamp"])).toBeGreaterThan(Date.now() / 1000 - 600);
    expect(hit.headers).not.toHaveProperty("webhook-signature");
    const deliveryOf = async (runId: string) => {
      const r = await fetch(`${server.url}/threads/${t.thread_id}/runs/${runId}/webhook`);
      return { status: r.status, body: (await r.json()) as Record<string, unknown> };
    };
    const delivered = await until(async () => {
      const d = await deliveryOf(ok.run_id);
      return d.body.state === "delivered" ? d : undefined;
    });
    expect(delivered.body).toMatchObject({
      delivery_id: hit.headers["webhook-id"],
      run_id: ok.run_id,
      attempts: 1,
      last_attempt: { status_code: 200, error: null },
    });

    // a receiver answering 410 Gone is not retried: the failure is readable at once
    const gone = await finished("gone", `${receiverUrl}/gone`);
    const failed = await until(async () => {
      const d = await deliveryOf(gone.run_id);
      return d.body.state === "failed" ? d : undefined;
    });
    expect(failed.body).toMatchObject({ attempts: 1, next_attempt_at: null, last_attempt: { status_code: 410, error: expect.stringMatching(/HTTP 410/) } });

    // a run without a webhook has no delivery
    const none = await deliveryOf((await finished("none")).run_id);
    expect(none.status).toBe(404);
    expect(none.body.detail).toMatch(/has no webhook/);
  });

  it("refuses webhook URLs that break the policy with 422", async () => {
    const t = await client.threads.create();
    const r = await fetch(`${server.url}/threads/${t.thread_id}/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ assistant_id: "echo", webhook: "ftp://example.com/x" }),
    });
    expect(r.status).toBe(422);
    const body = (await r.json()) as { detail: { loc: string[] }[] };
    expect(body.detail[0].loc).toEqual(["body", "webhook"]);
  });

  it("sends none when the config disables webhooks (http.disable_webhooks)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "troupe-nohooks-"));
    const config = join(dir, "service.json");
    writeFileSync(config, JSON.stringify({ graphs: { echo: `${join(REPO, "examples/echo.ts")}:graph` }, http: { disable_webhooks: true } }));
    const quiet = await startTestServer({ config, dataDir: join(dir, "data"), workers: 1 });
    try {
      const c = new Client({ apiUrl: quiet.url, apiKey: null });
      const t = await c.threads.create();
      await c.runs.wait(t.thread_id, "echo", { input: { messages: [{ role: "human", content: "quiet" }] }, webhook: `${receiverUrl}/quiet` });
      await new Promise((r) => setTimeout(r, 1_000)); // a webhook arrives within milliseconds when enabled
      expect(received.filter((x) => x.path === "/quiet")).toEqual([]);
    } finally {
      await quiet.stop();
      quiet.cleanup();
    }
  });
});
