// Run options end to end: after_seconds, on_disconnect=cancel, running from a checkpoint (fork),
// stateless on_completion=keep, bulk cancel, a bad config stopping startup with a clear message, and
// low-memory mode.
import { describe, expect, it } from "vitest";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import { startTestServer } from "./helpers/server.ts";
import { human, useServer } from "./helpers/suite.ts";
import { waitUntil } from "./helpers/wait.ts";

const fx = useServer();

describe("run options", () => {
  it("delays a run with after_seconds", async () => {
    const t = await fx.client.threads.create();
    const start = Date.now();
    const run = await fx.client.runs.create(t.thread_id, "echo", { input: human("later"), afterSeconds: 1 });
    expect(Date.parse(run.created_at)).toBeGreaterThanOrEqual(start + 900);
    await new Promise((r) => setTimeout(r, 300));
    expect((await fx.client.runs.get(t.thread_id, run.run_id)).status).toBe("pending");
    await fx.client.runs.join(t.thread_id, run.run_id);
    expect(Date.now() - start).toBeGreaterThanOrEqual(900);
    expect((await fx.client.runs.get(t.thread_id, run.run_id)).status).toBe("success");
  });

  it("does not hold a run that is due now behind a delayed one, and an interrupt of a delayed run leaves the thread busy", async () => {
    const t = await fx.client.threads.create();
    const delayed = await fx.client.runs.create(t.thread_id, "echo", { input: human("in 60 s"), afterSeconds: 60 });
    const now = await fx.client.runs.create(t.thread_id, "echo", { input: human("now") });
    // joined long before the delayed run is due (the timer armed for it used to hold this one too)
    await fx.client.runs.join(t.thread_id, now.run_id);
    expect((await fx.client.runs.get(t.thread_id, now.run_id)).status).toBe("success");
    expect((await fx.client.runs.get(t.thread_id, delayed.run_id)).status).toBe("pending");

    const next = await fx.client.runs.create(t.thread_id, "slow", {
      input: human("next"),
      multitaskStrategy: "interrupt",
      config: { configurable: { sleep_ms: 500 } },
    });
    expect((await fx.client.runs.get(t.thread_id, delayed.run_id)).status).toBe("interrupted");
    expect((await fx.client.threads.get(t.thread_id)).status).toBe("busy");
    await fx.client.runs.join(t.thread_id, next.run_id);
    expect((await fx.client.runs.get(t.thread_id, next.run_id)).status).toBe("success");
    expect((await fx.client.threads.get(t.thread_id)).status).toBe("idle");
  });

  it("cancels a streamed run when the client disconnects with on_disconnect=cancel", async () => {
    const t = await fx.client.threads.create();
    const ac = new AbortController();
    const res = await fetch(`${fx.server.url}/threads/${t.thread_id}/runs/stream`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ assistant_id: "slow", input: human("x"), config: { configurable: { sleep_ms: 3000 } }, on_disconnect: "cancel" }),
      signal: ac.signal,
    });
    const runId = /runs\/([0-9a-f-]+)/.exec(res.headers.get("content-location") ?? "")![1];
    const reader = res.body!.getReader();
    await reader.read();
    ac.abort();
    await waitUntil(async () => (await fx.client.runs.get(t.thread_id, runId)).status === "interrupted", { what: "the run to be interrupted" });
  });

  it("forks from an earlier checkpoint with checkpoint_id", async () => {
    const t = await fx.client.threads.create();
    await fx.client.runs.wait(t.thread_id, "echo", { input: human("first") });
    await fx.client.runs.wait(t.thread_id, "echo", { input: human("second") });
    const history = await fx.client.threads.getHistory(t.thread_id, { limit: 50 });
    const afterFirst = history.find((s) => (s.values as { messages?: unknown[] }).messages?.length === 2 && s.next.length === 0)!;
    const out = (await fx.client.runs.wait(t.thread_id, "echo", { input: human("fork"), checkpointId: afterFirst.checkpoint.checkpoint_id! })) as {
      messages: { content: string }[];
    };
    expect(out.messages.map((m) => m.content).filter((c) => c !== "first")).not.toContain("second");
    expect(out.messages.at(-1)!.content).toContain("fork");
    // the next run goes on from the fork: the fork's checkpoint_id is that run's, not the thread's
    const next = (await fx.client.runs.wait(t.thread_id, "echo", { input: human("next") })) as { messages: { content: string }[] };
    expect(next.messages.map((m) => m.content).slice(-4)).toEqual([...out.messages.slice(-2).map((m) => m.content), "next", "next"]);
    expect((await fx.client.threads.get(t.thread_id)).config?.configurable).not.toHaveProperty("checkpoint_id");
    // a checkpoint the thread does not have: refused, and the thread is untouched
    const unknown = "1ef00000-0000-6000-8000-000000000000";
    await expect(fx.client.runs.wait(t.thread_id, "echo", { input: human("lost"), checkpointId: unknown })).rejects.toThrow(/HTTP 404/);
    const latest = await fx.client.threads.getState(t.thread_id);
    expect((latest.values as { messages: { content: string }[] }).messages.at(-1)!.content).toBe("next");
  });

  it("keeps the temporary thread of a stateless run with on_completion=keep, and bulk-cancels", async () => {
    const r = await fetch(`${fx.server.url}/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ assistant_id: "echo", input: human("keep me"), on_completion: "keep" }),
    });
    const run = (await r.json()) as { run_id: string; thread_id: string };
    expect(r.headers.get("content-location")).toBe(`/runs/${run.run_id}`);
    await fx.client.runs.join(run.thread_id, run.run_id);
    const state = await fx.client.threads.getState(run.thread_id);
    expect((state.values as { messages: unknown[] }).messages).toHaveLength(2);

    const t = await fx.client.threads.create();
    const runs = [];
    for (let i = 0; i < 3; i++)
      runs.push(await fx.client.runs.create(t.thread_id, "slow", { input: human(String(i)), config: { configurable: { sleep_ms: 2000 } } }));
    await fx.client.runs.cancelMany({ threadId: t.thread_id, status: "all" });
    for (const x of runs) {
      const final = await fx.client.runs.join(t.thread_id, x.run_id).then(() => fx.client.runs.get(t.thread_id, x.run_id));
      expect(final.status).toBe("interrupted");
    }
  });
});

describe("startup", () => {
  it("refuses a bad config with the file, key and problem", async () => {
    const dir = mkdtempSync(join(tmpdir(), "troupe-badcfg-"));
    const cfg = join(dir, "service.json");
    writeFileSync(cfg, JSON.stringify({ graphs: { agent: "./missing.ts:graph" }, http: { disable_webhooks: "yes" } }));
    await expect(startTestServer({ config: cfg, dataDir: join(dir, "data") })).rejects.toThrow(/service\.json: http\.disable_webhooks: .*boolean/);
  });

  it("serves in low-memory mode (--low-memory, TROUPE_LOW_MEMORY=1)", async () => {
    for (const opts of [{ extraArgs: ["--low-memory"] }, { env: { TROUPE_LOW_MEMORY: "1" } }]) {
      const server = await startTestServer({ ...opts, workers: 1 });
      try {
        expect(server.output()).toContain("low-memory mode (V8 --optimize-for-size)");
        const client = new Client({ apiUrl: server.url });
        const out = (await client.runs.wait(null, "echo", { input: human("small") })) as { messages: { content: string }[] };
        expect(out.messages.at(-1)!.content).toContain("small");
      } finally {
        await server.stop();
        server.cleanup();
      }
    }
  });
});
