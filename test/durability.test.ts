// kill -9 during a load of queued and running runs, restart on the same data dir: every
// accepted run ends in a final status, no thread stays busy, state and history still read,
// and join / join-stream on those runs still answer.
import { afterAll, describe, expect, it } from "vitest";
import { Client } from "@langchain/langgraph-sdk";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { openStorage } from "../src/storage/env.ts";

const servers: TestServer[] = [];
afterAll(async () => {
  for (const s of servers) await s.stop();
  servers[0]?.cleanup();
});

describe("crash recovery", () => {
  it("finishes every accepted run after kill -9 and restart", async () => {
    const first = await startTestServer();
    servers.push(first);
    const c1 = new Client({ apiUrl: first.url, apiKey: null });
    const threads = (await Promise.all(Array.from({ length: 8 }, () => c1.threads.create({ metadata: { crash: "test" } })))).map((t) => t.thread_id);
    // threads in parallel (so a slow, loaded machine still creates every run well within the first
    // runs' sleep), the 4 runs of a thread in order
    const perThread = await Promise.all(threads.map(async (threadId, i) => {
      const created: { threadId: string; runId: string }[] = [];
      for (let j = 0; j < 4; j++) {
        const r = await c1.runs.create(threadId, "slow", {
          input: { messages: [{ role: "human", content: `t${i} r${j}` }] },
          config: { configurable: { sleep_ms: 400 } },
        });
        created.push({ threadId, runId: r.run_id });
      }
      return created;
    }));
    const runs = perThread.flat();
    // the crash must hit running and queued runs (and possibly finished ones)
    let before = await Promise.all(runs.map((r) => c1.runs.get(r.threadId, r.runId)));
    for (let polls = 0; polls < 50 && !before.some((r) => r.status === "running"); polls++) {
      await new Promise((r) => setTimeout(r, 100));
      before = await Promise.all(runs.map((r) => c1.runs.get(r.threadId, r.runId)));
    }
    const statuses = before.map((r) => r.status).join(",");
    expect(before.some((r) => r.status === "running"), statuses).toBe(true);
    expect(before.some((r) => r.status === "pending"), statuses).toBe(true);
    await first.kill();

    const second = await startTestServer({ dataDir: first.dataDir });
    servers.push(second);
    const c2 = new Client({ apiUrl: second.url, apiKey: null });

    // join answers for every run: the final state of its thread (or an error)
    await Promise.all(runs.map((r) => c2.runs.join(r.threadId, r.runId)));
    const after = await Promise.all(runs.map((r) => c2.runs.get(r.threadId, r.runId)));
    for (const r of after) expect(["success", "error"]).toContain(r.status);
    // each run's record still shows the input it was accepted with (a resumed run runs with none)
    const inputOf = (r: unknown) => (r as { kwargs: { input: unknown } }).kwargs.input;
    for (const [k, r] of after.entries()) expect(inputOf(r)).toEqual(inputOf(before[k]));
    expect(after.filter((r) => r.status === "success").length).toBeGreaterThanOrEqual(runs.length - 2);

    for (const threadId of threads) {
      const t = await c2.threads.get(threadId);
      expect(t.status).not.toBe("busy");
      const state = await c2.threads.getState(threadId);
      const contents = (state.values as { messages: { type: string; content: string }[] }).messages.filter((m) => m.type === "human").map((m) => m.content);
      // each accepted input was applied once, in order, even across the crash
      expect(contents).toEqual([0, 1, 2, 3].map((j) => contents[0].replace(/r\d$/, `r${j}`)));
      const history = await c2.threads.getHistory(threadId, { limit: 100 });
      expect(history.length).toBeGreaterThan(4);
    }
    // join-stream on a finished run still answers (and closes)
    const events: unknown[] = [];
    for await (const e of c2.runs.joinStream(runs[0].threadId, runs[0].runId)) events.push(e);
    expect(Array.isArray(events)).toBe(true);
    expect(await c2.threads.count({ status: "busy" })).toBe(0);
  });

  it("deletes the temporary thread of a stateless run that recovery gives up on (max attempts)", async () => {
    const first = await startTestServer();
    servers.push(first);
    const c1 = new Client({ apiUrl: first.url, apiKey: null });
    const run = await c1.runs.create(null, "slow", { input: { messages: [{ role: "human", content: "doomed" }] }, config: { configurable: { sleep_ms: 60_000 } } });
    for (let polls = 0; polls < 100 && (await c1.runs.get(run.thread_id, run.run_id)).status !== "running"; polls++) await new Promise((r) => setTimeout(r, 50));
    await first.kill();
    // as if this run had already crashed the server twice more: its next recovery is past the limit
    const storage = openStorage(first.dataDir);
    const record = storage.runs.get([run.thread_id, run.run_id])!;
    expect(record.status).toBe("running");
    await storage.runs.put([run.thread_id, run.run_id], { ...record, attempt: 3 });
    await storage.close();

    const second = await startTestServer({ dataDir: first.dataDir });
    servers.push(second);
    let status = 0;
    for (let polls = 0; polls < 100 && status !== 404; polls++) {
      status = (await fetch(`${second.url}/threads/${run.thread_id}`)).status;
      if (status !== 404) await new Promise((r) => setTimeout(r, 50));
    }
    expect(status).toBe(404);
    expect((await fetch(`${second.url}/threads/${run.thread_id}/runs/${run.run_id}`)).status).toBe(404);
    await second.stop();
    second.cleanup();
  });

  it("re-executes a thread-centric protocol run after kill -9: its stream answers again on the new server", async () => {
    const first = await startTestServer();
    servers.push(first);
    const c1 = new Client({ apiUrl: first.url, apiKey: null });
    const thread = c1.threads.stream({ assistantId: "slow" });
    const { run_id } = await thread.run.start({ input: { messages: [{ role: "human", content: "survive" }] }, config: { configurable: { sleep_ms: 1_500 } } });
    if (!run_id) throw new Error("run.start answered no run_id");
    for (let polls = 0; polls < 50 && (await c1.runs.get(thread.threadId, run_id)).status !== "running"; polls++) await new Promise((r) => setTimeout(r, 50));
    await thread.close();
    await first.kill();

    const second = await startTestServer({ dataDir: first.dataDir });
    servers.push(second);
    const res = await fetch(`${second.url}/threads/${thread.threadId}/stream/events`, {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ channels: ["lifecycle", "values"], namespaces: [[]], depth: 0 }),
    });
    expect(res.status).toBe(200);
    const frames: { event: string; data: { params: { data: { event?: string; messages?: { content: string }[] } } } }[] = [];
    const decoder = new TextDecoder();
    let buf = "";
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const deadline = Date.now() + 20_000;
    while (!frames.some((f) => f.event === "lifecycle" && f.data.params.data.event === "completed") && Date.now() < deadline) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      const blocks = buf.split("\n\n");
      buf = blocks.pop() ?? "";
      for (const b of blocks) {
        const event = /^event: (.*)$/m.exec(b)?.[1];
        const data = /^data: (.*)$/m.exec(b)?.[1];
        if (event && data) frames.push({ event, data: JSON.parse(data) });
      }
    }
    await reader.cancel();
    const lifecycle = frames.filter((f) => f.event === "lifecycle").map((f) => f.data.params.data.event);
    expect(lifecycle).toEqual(["running", "completed"]);
    const last = frames.filter((f) => f.event === "values").at(-1)!.data.params.data.messages!;
    expect(last.map((m) => m.content)).toEqual(["survive", "survive"]); // the slow graph echoes after its sleep
    const c2 = new Client({ apiUrl: second.url, apiKey: null });
    expect((await c2.runs.get(thread.threadId, run_id)).status).toBe("success");
    expect((await c2.threads.get(thread.threadId)).status).toBe("idle");
    await second.stop();
    second.cleanup();
  });
});
