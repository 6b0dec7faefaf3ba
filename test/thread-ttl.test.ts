// Thread TTL end to end: `ttl` on thread create/update and the config's `checkpointer.ttl`
// (default_ttl with strategy delete / keep_latest), swept by a server whose sweep interval is
// shortened to 0.3 s. TTLs are fractional minutes here (0.005 min = 0.3 s).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { Client } from "@langchain/langgraph-sdk";
import { REPO, startTestServer, type TestServer } from "./helpers/server.ts";
import { rawRequest } from "./helpers/suite.ts";

const dir = mkdtempSync(join(tmpdir(), "troupe-ttl-"));
const servers: TestServer[] = [];
afterAll(async () => {
  for (const s of servers) {
    await s.stop();
    s.cleanup();
  }
  rmSync(dir, { recursive: true, force: true });
});

async function serverWith(ttl: Record<string, unknown>): Promise<{ server: TestServer; client: Client }> {
  const config = join(dir, `service-${servers.length}.json`);
  writeFileSync(config, JSON.stringify({
    graphs: { echo: join(REPO, "examples/echo.ts:graph"), slow: join(REPO, "examples/slow.ts:graph") },
    checkpointer: { ttl: { sweep_interval_minutes: 0.005, ...ttl } },
  }));
  const server = await startTestServer({ config });
  servers.push(server);
  return { server, client: new Client({ apiUrl: server.url, apiKey: null }) };
}

const human = (content: string) => ({ messages: [{ role: "human", content }] });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const gone = async (client: Client, threadId: string, withinMs: number): Promise<boolean> => {
  for (const deadline = Date.now() + withinMs; Date.now() < deadline; await sleep(100)) {
    if (await client.threads.get(threadId).then(() => false, () => true)) return true;
  }
  return false;
};

describe("thread TTL", () => {
  it("deletes a thread its ttl after its last update, not while a run keeps it busy; ttl null removes it", async () => {
    const { server, client } = await serverWith({});
    const short = await client.threads.create({ ttl: 0.005 });
    const object = await client.threads.create({ ttl: { ttl: 0.005, strategy: "delete" } });
    const none = await client.threads.create();
    const removed = await client.threads.create({ ttl: 0.005 });
    await client.threads.update(removed.thread_id, { ttl: null as unknown as number });
    const busy = await client.threads.create({ ttl: 0.005 });
    const run = await client.runs.create(busy.thread_id, "slow", { input: human("hold"), config: { configurable: { sleep_ms: 1_500 } } });

    expect(await gone(client, short.thread_id, 5_000)).toBe(true);
    expect(await gone(client, object.thread_id, 2_000)).toBe(true);
    // busy while its run sleeps: kept until the run ends, then deleted
    expect((await client.threads.get(busy.thread_id)).status).toBe("busy");
    await client.runs.join(busy.thread_id, run.run_id);
    expect(await gone(client, busy.thread_id, 5_000)).toBe(true);
    await sleep(500);
    expect((await client.threads.get(none.thread_id)).thread_id).toBe(none.thread_id);
    expect((await client.threads.get(removed.thread_id)).thread_id).toBe(removed.thread_id);

    const bad = await rawRequest(server.url, "/threads", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ ttl: { ttl: -1 } }) });
    expect(bad.status).toBe(422);
  });

  it("applies the config's default_ttl: strategy keep_latest prunes expired threads to their latest checkpoint", async () => {
    const { client } = await serverWith({ default_ttl: 0.005, strategy: "keep_latest" });
    const t = await client.threads.create();
    await client.runs.wait(t.thread_id, "echo", { input: human("one") });
    await client.runs.wait(t.thread_id, "echo", { input: human("two") });
    const latest = await client.threads.getState(t.thread_id);
    let history = await client.threads.getHistory(t.thread_id, { limit: 100 });
    for (const deadline = Date.now() + 5_000; history.length > 1 && Date.now() < deadline; await sleep(100)) {
      history = await client.threads.getHistory(t.thread_id, { limit: 100 });
    }
    expect(history).toHaveLength(1);
    expect(history[0].checkpoint.checkpoint_id).toBe(latest.checkpoint.checkpoint_id);
    expect((await client.threads.get(t.thread_id)).values).toEqual(latest.values);
  });

  it("applies the config's default_ttl with strategy delete to threads without their own ttl", async () => {
    const { client } = await serverWith({ default_ttl: 0.005 });
    const t = await client.threads.create();
    await client.runs.wait(t.thread_id, "echo", { input: human("bye") });
    expect(await gone(client, t.thread_id, 5_000)).toBe(true);
  });
});
