// kill -9 during a load of queued and running runs, restart on the same data dir: every
// accepted run ends in a final status, no thread stays busy, state and history still read,
// and join / join-stream on those runs still answer. What a 2xx promised survives too: stops
// (cancel, multitask interrupt/rollback) and run-completion webhooks (the outbox), also when the
// process dies again during startup recovery.
import { afterAll, describe, expect, it } from "vitest";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import { Webhook } from "standardwebhooks";
import { REPO, openServerStorage, startTestServer, type StartOptions, type TestServer } from "./helpers/server.ts";
import type { RunRecord } from "../src/storage/records.ts";
import { waitUntil } from "./helpers/wait.ts";

const servers: TestServer[] = [];
afterAll(async () => {
  for (const s of servers) await s.stop();
  servers[0]?.cleanup();
});

/** Rewrites a running run's record in a killed server's storage (either backend), as a crash could have left it. */
async function replaceRunRecord(killed: TestServer, threadId: string, runId: string, change: (record: RunRecord) => RunRecord): Promise<void> {
  const storage = await openServerStorage(killed);
  try {
    const record = await storage.runs.get(threadId, runId);
    expect(record?.status).toBe("running");
    await storage.runs.save(change(record!)).committed;
  } finally {
    await storage.close();
  }
}

describe("crash recovery", () => {
  it("finishes every accepted run after kill -9 and restart", async () => {
    const first = await startTestServer();
    servers.push(first);
    const c1 = new Client({ apiUrl: first.url, apiKey: null });
    const threads = (await Promise.all(Array.from({ length: 8 }, () => c1.threads.create({ metadata: { crash: "test" } })))).map((t) => t.thread_id);
    // threads in parallel (so a slow, loaded machine still creates every run well within the first
    // runs' sleep: 1.5 s, as a create on PostgreSQL under load took ~0.5 s), the 4 runs of a thread in order
    const perThread = await Promise.all(
      threads.map(async (threadId, i) => {
        const created: { threadId: string; runId: string }[] = [];
        for (let j = 0; j < 4; j++) {
          const r = await c1.runs.create(threadId, "slow", {
            input: { messages: [{ role: "human", content: `t${i} r${j}` }] },
            config: { configurable: { sleep_ms: 1_500 } },
          });
          created.push({ threadId, runId: r.run_id });
        }
        return created;
      }),
    );
    const runs = perThread.flat();
    // the crash must hit running and queued runs (and possibly finished ones)
    let before = await Promise.all(runs.map((r) => c1.runs.get(r.threadId, r.runId)));
    for (let polls = 0; polls < 50 && !before.some((r) => r.status === "running"); polls++) {
      await new Promise((r) => setTimeout(r, 100));
      before = await Promise.all(runs.map((r) => c1.runs.get(r.threadId, r.runId)));
    }
    const statuses = before.map((r) => r.status).join(",");
    expect(
      before.some((r) => r.status === "running"),
      statuses,
    ).toBe(true);
    expect(
      before.some((r) => r.status === "pending"),
      statuses,
    ).toBe(true);
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
  }, 120_000); // on PostgreSQL the server is a cluster node: the killed one's leases expire (15 s) before their runs resume

  it("deletes the temporary thread of a stateless run that recovery gives up on (max attempts)", async () => {
    const first = await startTestServer();
    servers.push(first);
    const c1 = new Client({ apiUrl: first.url, apiKey: null });
    const run = await c1.runs.create(null, "slow", {
      input: { messages: [{ role: "human", content: "doomed" }] },
      config: { configurable: { sleep_ms: 60_000 } },
    });
    await until("the run to start", async () => (await c1.runs.get(run.thread_id, run.run_id)).status === "running");
    await first.kill();
    // as if this run had already crashed the server twice more: its next recovery is past the limit
    await replaceRunRecord(first, run.thread_id, run.run_id, (record) => ({ ...record, attempt: 3 }));

    const second = await startTestServer({ dataDir: first.dataDir });
    servers.push(second);
    // on PostgreSQL the server is a cluster node: the killed one's lease on the thread expires (15 s)
    // before the new one's takeover scan recovers it
    await until("the temporary thread deleted", async () => (await fetch(`${second.url}/threads/${run.thread_id}`)).status === 404, 45_000);
    expect((await fetch(`${second.url}/threads/${run.thread_id}/runs/${run.run_id}`)).status).toBe(404);
    await second.stop();
    second.cleanup();
  }, 120_000);

  it("re-executes a thread-centric protocol run after kill -9: its stream answers again on the new server", async () => {
    const first = await startTestServer();
    servers.push(first);
    const c1 = new Client({ apiUrl: first.url, apiKey: null });
    const thread = c1.threads.stream({ assistantId: "slow" });
    const { run_id } = await thread.run.start({ input: { messages: [{ role: "human", content: "survive" }] }, config: { configurable: { sleep_ms: 1_500 } } });
    if (!run_id) throw new Error("run.start answered no run_id");
    await until("the run to start", async () => (await c1.runs.get(thread.threadId, run_id)).status === "running");
    await thread.close();
    await first.kill();

    const second = await startTestServer({ dataDir: first.dataDir });
    servers.push(second);
    const res = await fetch(`${second.url}/threads/${thread.threadId}/stream/events`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ channels: ["lifecycle", "values"], namespaces: [[]], depth: 0 }),
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

// ---------- what a 2xx promised: stops and webhooks ----------
// (each test starts two or three servers: on a loaded machine that alone can take a minute)

/** Polls `check` until it holds (the shared waitUntil, worded for this file's many waits). */
const until = (what: string, check: () => Promise<boolean>, timeoutMs = 30_000) => waitUntil(check, { what, timeoutMs, intervalMs: 50 });

type Message = { type: string; content: string };
const contentsOf = async (c: Client, threadId: string): Promise<string[]> =>
  ((await c.threads.getState(threadId)).values as { messages: Message[] }).messages.map((m) => m.content);

interface Hook {
  url: string;
  headers: IncomingMessage["headers"];
  raw: string;
  body: { run_id: string; status: string; cancel_reason?: string };
  /** the status answered, undefined while held */
  answered?: number;
}

/**
 * A real webhook receiver. Until `answering` is set it holds requests to /hang open (an attempt
 * in flight) and answers 500 elsewhere (a retry pending); then it answers 200.
 */
class HookReceiver {
  readonly hooks: Hook[] = [];
  answering = false;
  url = "";
  private readonly held: ServerResponse[] = [];
  private server!: Server;

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      let raw = "";
      req.on("data", (d: Buffer) => (raw += d.toString()));
      req.on("end", () => {
        const hook: Hook = { url: req.url ?? "", headers: req.headers, raw, body: JSON.parse(raw) as Hook["body"] };
        this.hooks.push(hook);
        if (!this.answering && hook.url.startsWith("/hang")) return void this.held.push(res);
        hook.answered = this.answering ? 200 : 500;
        res.statusCode = hook.answered;
        res.end();
      });
    });
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  of(runId: string): Hook[] {
    return this.hooks.filter((h) => h.body.run_id === runId);
  }

  delivered(runId: string): boolean {
    return this.of(runId).some((h) => h.answered === 200);
  }

  async stop(): Promise<void> {
    for (const res of this.held) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

const SECRET = `whsec_${Buffer.alloc(32, 42).toString("base64")}`;

/** The graphs this file uses, with webhook deliveries signed (webhooks.signing_secret), in `dir`. */
function signingConfig(dir: string): string {
  const config = join(dir, "service.json");
  writeFileSync(
    config,
    JSON.stringify({
      graphs: { echo: `${join(REPO, "examples/echo.ts")}:graph`, slow: `${join(REPO, "examples/slow.ts")}:graph` },
      webhooks: { signing_secret: SECRET },
    }),
  );
  return config;
}

/** Runs `body` with a starter of servers on one data dir (every one after the first reuses it); all stopped and the dir removed at the end. */
async function onOneDataDir(body: (start: (opts?: StartOptions) => Promise<TestServer>) => Promise<void>): Promise<void> {
  const started: TestServer[] = [];
  const start = async (opts: StartOptions = {}) => {
    const server = await startTestServer({ ...opts, dataDir: started[0]?.dataDir ?? opts.dataDir });
    started.push(server);
    return server;
  };
  try {
    await body(start);
  } finally {
    for (const server of started) await server.stop();
    started[0]?.cleanup();
  }
}

const getRun = async (url: string, threadId: string, runId: string) => {
  const res = await fetch(`${url}/threads/${threadId}/runs/${runId}`);
  return { status: res.status, run: res.status === 200 ? ((await res.json()) as { status: string; cancel_reason?: string }) : undefined };
};

describe("stops answered 2xx survive a crash", { timeout: 180_000 }, () => {
  it("cancel (202), multitask interrupt and rollback (200), then kill -9: recovery ends the old runs, never resumes them", () =>
    onOneDataDir(async (start) => {
      const first = await start();
      const c1 = new Client({ apiUrl: first.url, apiKey: null });
      const [ta, tb, tc] = (await Promise.all([0, 1, 2].map(() => c1.threads.create()))).map((t) => t.thread_id);
      const human = (content: string) => ({ messages: [{ role: "human", content }] });
      const old = await Promise.all(
        [ta, tb, tc].map((t, i) => c1.runs.create(t, "slow", { input: human(`old-${i}`), config: { configurable: { sleep_ms: 5_000 } } })),
      );
      // inside their node: each has checkpointed its input
      await until("the three runs checkpointed their input", async () =>
        (await Promise.all([ta, tb, tc].map((t) => contentsOf(c1, t)))).every((c, i) => c[0] === `old-${i}`),
      );

      const [cancel, interrupting, rollingBack] = await Promise.all([
        fetch(`${first.url}/threads/${ta}/runs/${old[0].run_id}/cancel`, { method: "POST" }),
        c1.runs.create(tb, "slow", { input: human("new-1"), multitaskStrategy: "interrupt", config: { configurable: { sleep_ms: 10 } } }),
        c1.runs.create(tc, "slow", { input: human("new-2"), multitaskStrategy: "rollback", config: { configurable: { sleep_ms: 10 } } }),
      ]);
      expect(cancel.status).toBe(202);
      // readers see the stop at once: the run carries it (or has already ended by it)
      const seen = await Promise.all(old.map((r) => getRun(first.url, r.thread_id, r.run_id)));
      const expectedReason = ["interrupt", "interrupt", "rollback"];
      seen.forEach(({ status, run }, i) => {
        if (status === 404) return expect(i).toBe(2); // only a rollback deletes the run
        expect(run!.cancel_reason).toBe(expectedReason[i]);
        expect(["running", "interrupted"]).toContain(run!.status);
      });
      await first.kill();

      const second = await start();
      const c2 = new Client({ apiUrl: second.url, apiKey: null });
      await Promise.all([interrupting, rollingBack].map((r) => c2.runs.join(r.thread_id, r.run_id)));
      await until("the cancelled run ended", async () => (await getRun(second.url, ta, old[0].run_id)).run?.status === "interrupted", 30_000);

      expect(await c2.runs.get(ta, old[0].run_id)).toMatchObject({ status: "interrupted", cancel_reason: "interrupt" });
      expect(await contentsOf(c2, ta)).toEqual(["old-0"]); // its node never completed: no echo
      expect(await c2.runs.get(tb, old[1].run_id)).toMatchObject({ status: "interrupted", cancel_reason: "interrupt" });
      expect((await c2.runs.get(tb, interrupting.run_id)).status).toBe("success");
      expect(await contentsOf(c2, tb)).toEqual(["old-1", "new-1", "new-1"]); // the old run's work up to its stop is kept
      expect((await getRun(second.url, tc, old[2].run_id)).status).toBe(404); // rolled back: gone, with its checkpoints
      expect((await c2.runs.get(tc, rollingBack.run_id)).status).toBe("success");
      expect(await contentsOf(c2, tc)).toEqual(["new-2", "new-2"]);
      for (const t of [ta, tb, tc]) expect((await c2.threads.get(t)).status).toBe("idle");
    }));

  it("carries out a stop committed just before the crash (rollback): the run and its work are gone, the next run starts clean", () =>
    onOneDataDir(async (start) => {
      const first = await start();
      const c1 = new Client({ apiUrl: first.url, apiKey: null });
      const { thread_id } = await c1.threads.create();
      const doomed = await c1.runs.create(thread_id, "slow", {
        input: { messages: [{ role: "human", content: "discard me" }] },
        config: { configurable: { sleep_ms: 60_000 } },
      });
      const next = await c1.runs.create(thread_id, "slow", {
        input: { messages: [{ role: "human", content: "keep me" }] },
        config: { configurable: { sleep_ms: 10 } },
      });
      await until("the first run is running", async () => (await c1.runs.get(thread_id, doomed.run_id)).status === "running");
      await first.kill();
      // the record a rollback writes with its 200 (multitask) or 202 (cancel), committed just before the kill
      await replaceRunRecord(first, thread_id, doomed.run_id, (record) => ({ ...record, cancel_reason: "rollback" }));

      const second = await start();
      const c2 = new Client({ apiUrl: second.url, apiKey: null });
      await c2.runs.join(thread_id, next.run_id);
      expect((await getRun(second.url, thread_id, doomed.run_id)).status).toBe(404);
      expect((await c2.runs.get(thread_id, next.run_id)).status).toBe("success");
      expect(await contentsOf(c2, thread_id)).toEqual(["keep me", "keep me"]);
      const history = await c2.threads.getHistory(thread_id, { limit: 100 });
      expect(history.every((s) => s.metadata?.run_id !== doomed.run_id)).toBe(true);
      expect((await c2.threads.get(thread_id)).status).toBe("idle");
    }));
});

describe("webhooks survive a crash (the outbox)", { timeout: 180_000 }, () => {
  it("runs that finished just before kill -9 each get their webhook after the restart, signed, with one delivery id", () =>
    onOneDataDir(async (start) => {
      const rx = await new HookReceiver().start();
      const configDir = mkdtempSync(join(tmpdir(), "troupe-durable-hooks-"));
      try {
        const first = await start({ config: signingConfig(configDir) });
        const c1 = new Client({ apiUrl: first.url, apiKey: null });
        const threads = (await Promise.all(Array.from({ length: 8 }, () => c1.threads.create()))).map((t) => t.thread_id);
        // half the receivers hold the attempt open (in flight at the crash), half answer 500 (a retry pending)
        const runs = await Promise.all(
          threads.map(async (threadId, i) => {
            const run = await c1.runs.create(threadId, "echo", {
              input: { messages: [{ role: "human", content: `hook ${i}` }] },
              webhook: `${rx.url}/${i % 2 ? "fail" : "hang"}?i=${i}`,
            });
            await c1.runs.join(threadId, run.run_id);
            return run;
          }),
        );
        const deliveryOf = async (url: string, r: { thread_id: string; run_id: string }) =>
          (await (await fetch(`${url}/threads/${r.thread_id}/runs/${r.run_id}/webhook`)).json()) as {
            state: string;
            attempts: number;
            last_attempt: { status_code: number | null } | null;
            delivery_id: string;
          };
        await until(
          "every webhook was attempted once, the 500s recorded for a retry",
          async () => {
            if (!runs.every((r) => rx.of(r.run_id).length > 0)) return false;
            const pending = await Promise.all(runs.filter((_, i) => i % 2).map((r) => deliveryOf(first.url, r)));
            return pending.every((d) => d.state === "pending" && d.attempts === 1 && d.last_attempt?.status_code === 500);
          },
          30_000,
        );
        await first.kill();
        expect(runs.filter((r) => rx.delivered(r.run_id))).toEqual([]);

        rx.answering = true;
        const second = await start({ config: signingConfig(configDir) });
        await until(
          "every webhook was delivered and its outcome recorded",
          async () =>
            runs.every((r) => rx.delivered(r.run_id)) && (await Promise.all(runs.map((r) => deliveryOf(second.url, r)))).every((d) => d.state === "delivered"),
          30_000,
        );
        for (const [i, run] of runs.entries()) {
          const hooks = rx.of(run.run_id);
          const ids = new Set(hooks.map((h) => h.headers["webhook-id"]));
          expect(ids.size, `one delivery id across attempts and restarts for run ${i}`).toBe(1);
          for (const h of hooks) {
            expect(new Webhook(SECRET).verify(h.raw, h.headers as Record<string, string>)).toMatchObject({ run_id: run.run_id, status: "success" });
          }
          const delivery = await deliveryOf(second.url, run);
          expect(delivery).toMatchObject({ delivery_id: [...ids][0], state: "delivered", next_attempt_at: null, last_attempt: { status_code: 200 } });
          expect(delivery.attempts).toBe(i % 2 ? 2 : 1); // the held attempt was cut off by the crash; the 500 was recorded before it
        }
      } finally {
        await rx.stop();
        rmSync(configDir, { recursive: true, force: true });
      }
    }));
});

describe("a crash during startup recovery", { timeout: 180_000 }, () => {
  it("kill -9, restart, kill -9 again while recovery runs, restart: every run ends as its requests said, each webhook delivered", () =>
    onOneDataDir(async (start) => {
      const rx = await new HookReceiver().start();
      try {
        const first = await start();
        const c1 = new Client({ apiUrl: first.url, apiKey: null });
        const threads = (await Promise.all([0, 1, 2].map(() => c1.threads.create()))).map((t) => t.thread_id);
        const runs = await Promise.all(
          threads.map(async (threadId, i) => {
            const made = [];
            for (const [j, sleepMs] of [3_000, 300].entries()) {
              made.push(
                await c1.runs.create(threadId, "slow", {
                  input: { messages: [{ role: "human", content: `t${i} r${j}` }] },
                  config: { configurable: { sleep_ms: sleepMs } },
                  webhook: `${rx.url}/hang`,
                }),
              );
            }
            return made;
          }),
        );
        const [cancelled] = runs[0];
        await until("the first runs checkpointed their input", async () =>
          (await Promise.all(threads.map((t) => contentsOf(c1, t)))).every((c, i) => c[0] === `t${i} r0`),
        );
        expect((await fetch(`${first.url}/threads/${cancelled.thread_id}/runs/${cancelled.run_id}/cancel`, { method: "POST" })).status).toBe(202);
        await first.kill();

        // recovery under way: the stop is carried out, the other first runs re-execute (3 s each)
        const second = await start();
        await until(
          "recovery ended the cancelled run",
          async () => (await getRun(second.url, cancelled.thread_id, cancelled.run_id)).run?.status === "interrupted",
          30_000,
        );
        await second.kill();

        rx.answering = true;
        const third = await start();
        const c3 = new Client({ apiUrl: third.url, apiKey: null });
        await Promise.all(runs.flat().map((r) => c3.runs.join(r.thread_id, r.run_id)));
        for (const [i, [r0, r1]] of runs.entries()) {
          expect(await c3.runs.get(r0.thread_id, r0.run_id)).toMatchObject(
            i === 0 ? { status: "interrupted", cancel_reason: "interrupt" } : { status: "success" },
          );
          expect((await c3.runs.get(r1.thread_id, r1.run_id)).status).toBe("success");
          // each input applied once, in order; the cancelled run's node never completed
          expect(await contentsOf(c3, threads[i])).toEqual(i === 0 ? ["t0 r0", "t0 r1", "t0 r1"] : [`t${i} r0`, `t${i} r0`, `t${i} r1`, `t${i} r1`]);
          expect((await c3.threads.get(threads[i])).status).toBe("idle");
        }
        await until("every webhook was delivered", async () => runs.flat().every((r) => rx.delivered(r.run_id)), 30_000);
        for (const r of runs.flat()) expect(new Set(rx.of(r.run_id).map((h) => h.headers["webhook-id"])).size).toBe(1);
        expect(rx.of(cancelled.run_id).find((h) => h.answered === 200)!.body).toMatchObject({ status: "interrupted", cancel_reason: "interrupt" });
      } finally {
        await rx.stop();
      }
    }));
});
