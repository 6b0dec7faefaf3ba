// GET /threads/{t}/stream through the real SDK (`client.threads.joinStream`) against a spawned
// server: run events, lifecycle and state_update modes, Last-Event-ID resumption, 404/422, client
// aborts and thread deletion; plus the ThreadStreamHub's buffer bounds and unsubscribe on its own.
import { describe, expect, it } from "vitest";
import { Client } from "@langchain/langgraph-sdk";
import { ThreadStreamHub, type ThreadStreamEvent, type ThreadStreamMode } from "../src/hub/thread-stream-hub.ts";
import { human, rawRequest, useServer } from "./helpers/suite.ts";
import { waitUntil } from "./helpers/wait.ts";

const fx = useServer();

interface Part {
  id?: string;
  event: string;
  data: any;
}

/** A joinStream consumer: collects parts, resolves `connected` once the server answered with the stream head. */
function openStream(threadId: string, opts: { streamMode?: ThreadStreamMode | ThreadStreamMode[]; lastEventId?: string } = {}) {
  let onConnected!: () => void;
  const connected = new Promise<void>((r) => (onConnected = r));
  const client = new Client({
    apiUrl: fx.server.url,
    apiKey: null,
    callerOptions: {
      fetch: async (...args: Parameters<typeof fetch>) => {
        const res = await fetch(...args);
        if (String(args[0]).includes("/stream")) onConnected();
        return res;
      },
    },
  });
  const abort = new AbortController();
  const parts: Part[] = [];
  const waiters: (() => void)[] = [];
  const done = (async () => {
    try {
      for await (const p of client.threads.joinStream(threadId, { ...opts, signal: abort.signal })) {
        parts.push(p as Part);
        for (const w of waiters.splice(0)) w();
      }
    } finally {
      onConnected(); // an error reply also "connects"
      for (const w of waiters.splice(0)) w();
    }
  })();
  done.catch(() => undefined);
  /** resolves with the parts once `pred` holds (checked on every new part), fails after timeoutMs */
  const until = async (pred: (ps: Part[]) => boolean, timeoutMs = 8_000): Promise<Part[]> => {
    const deadline = Date.now() + timeoutMs;
    while (!pred(parts)) {
      if (Date.now() > deadline) throw new Error(`timed out; got ${JSON.stringify(parts.map((p) => p.event))}`);
      await Promise.race([new Promise<void>((r) => waiters.push(r)), new Promise((r) => setTimeout(r, 200)), done.catch(() => undefined)]);
    }
    return parts;
  };
  return { parts, connected, done, until, abort: () => abort.abort() };
}

const ids = (ps: Part[]) => ps.map((p) => Number(p.id));
const increasing = (xs: number[]) => xs.every((x, i) => Number.isInteger(x) && (i === 0 || x > xs[i - 1]));

describe("GET /threads/{t}/stream (joinStream)", () => {
  it("keeps an idle stream alive with an SSE comment every 5 s (proxies drop silent connections)", async () => {
    const t = await fx.client.threads.create();
    const abort = new AbortController();
    const res = await fetch(`${fx.server.url}/threads/${t.thread_id}/stream`, { signal: abort.signal });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const started = Date.now();
    let text = "";
    const decoder = new TextDecoder();
    while (!text.includes(": heartbeat\n\n") && Date.now() - started < 8_000) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value);
    }
    abort.abort();
    expect(text).toContain(": heartbeat\n\n");
    expect(Date.now() - started).toBeGreaterThanOrEqual(4_000); // not sooner than the interval
    expect(text.replace(/^:.*\n\n/gm, "")).toBe(""); // only comments: no event on an idle thread
  }, 15_000);

  it("run_modes (default) delivers the events of every run started after connecting, and stays open", async () => {
    const t = await fx.client.threads.create();
    const s = openStream(t.thread_id);
    await s.connected;
    const run1 = await fx.client.runs.create(t.thread_id, "echo", { input: human("one"), streamMode: ["values", "updates"] });
    await fx.client.runs.join(t.thread_id, run1.run_id);
    const first = await s.until((ps) => ps.filter((p) => p.event === "values").length >= 2);
    expect(first[0]).toMatchObject({ event: "metadata", data: { run_id: run1.run_id, attempt: 1 } });
    expect(first.map((p) => p.event)).toEqual(["metadata", "values", "updates", "values"]);
    expect(first.at(-1)!.data.messages.at(-1)).toMatchObject({ type: "ai", content: "one" });

    const run2 = await fx.client.runs.wait(t.thread_id, "echo", { input: human("two") });
    expect(run2).toBeDefined();
    const all = await s.until(
      (ps) => ps.filter((p) => p.event === "metadata").length >= 2 && ps.at(-1)!.event === "values" && ps.at(-1)!.data.messages.length === 4,
    );
    expect(all.filter((p) => p.event === "metadata").length).toBe(2);
    expect(all.some((p) => ["run_start", "run_end", "state_update"].includes(p.event))).toBe(false);
    expect(increasing(ids(all))).toBe(true);
    s.abort();
    await s.done.catch(() => undefined);
  });

  it("picks up the run in flight from its live point on", async () => {
    const t = await fx.client.threads.create();
    // read the run's own stream up to its first values chunk; the node then sleeps for a second
    const own = fx.client.runs
      .stream(t.thread_id, "slow", { input: human("late"), config: { configurable: { sleep_ms: 1_000 } }, streamMode: "values" })
      [Symbol.asyncIterator]();
    let runId = "";
    for (let p = await own.next(); !p.done && p.value.event !== "values"; p = await own.next()) {
      if (p.value.event === "metadata") runId = (p.value.data as { run_id: string }).run_id;
    }
    const s = openStream(t.thread_id, { streamMode: ["run_modes", "lifecycle"] });
    await s.connected;
    const ps = await s.until((p) => p.some((x) => x.event === "run_end"));
    expect(ps.map((p) => p.event)).toEqual(["values", "run_end"]); // no replay of what happened before connecting
    expect(ps[1].data).toMatchObject({ run_id: runId, status: "success" });
    for (let p = await own.next(); !p.done; p = await own.next());
    s.abort();
  });

  it("picks up a background run whose events wait in its worker", async () => {
    const t = await fx.client.threads.create();
    const run = await fx.client.runs.create(t.thread_id, "slow", { input: human("held"), config: { configurable: { sleep_ms: 1_000 } }, streamMode: "values" });
    await waitUntil(async () => (await fx.client.runs.get(t.thread_id, run.run_id)).status === "running", { what: "the run to start" });
    const s = openStream(t.thread_id, { streamMode: ["run_modes", "lifecycle"] });
    await s.connected;
    const ps = await s.until((p) => p.some((x) => x.event === "run_end"));
    const last = ps.filter((p) => p.event === "values").at(-1);
    expect(last?.data.messages.at(-1)).toMatchObject({ type: "ai", content: "held" }); // the node's output, sent after connecting
    expect(ps.at(-1)).toMatchObject({ event: "run_end", data: { run_id: run.run_id, status: "success" } });
    s.abort();
  });

  it("lifecycle: run_start and run_end with run_id and status, nothing else", async () => {
    const t = await fx.client.threads.create();
    const s = openStream(t.thread_id, { streamMode: "lifecycle" });
    await s.connected;
    const ok = await fx.client.runs.create(t.thread_id, "echo", { input: human("hi") });
    await fx.client.runs.join(t.thread_id, ok.run_id);
    const bad = await fx.client.runs.create(t.thread_id, "error", { input: human("boom") });
    await fx.client.runs.join(t.thread_id, bad.run_id).catch(() => undefined);
    const ps = await s.until((p) => p.length >= 4);
    expect(ps.map((p) => p.event)).toEqual(["run_start", "run_end", "run_start", "run_end"]);
    expect(ps[0].data).toEqual({ run_id: ok.run_id, thread_id: t.thread_id, status: "running", attempt: 1 });
    expect(ps[1].data).toEqual({ run_id: ok.run_id, thread_id: t.thread_id, status: "success", thread_status: "idle" });
    expect(ps[3].data).toEqual({ run_id: bad.run_id, thread_id: t.thread_id, status: "error", thread_status: "error" });
    expect(increasing(ids(ps))).toBe(true);
    s.abort();
  });

  it("enqueued runs back to back: each run's run_end comes before the next run's run_start and events", async () => {
    // the next queued run starts before the previous one's outcome commits (thread-actor.ts), but
    // whatever it sends waits for that commit
    const t = await fx.client.threads.create();
    const s = openStream(t.thread_id, { streamMode: ["lifecycle", "run_modes"] });
    await s.connected;
    const runs = [];
    for (let i = 0; i < 12; i++) runs.push(await fx.client.runs.create(t.thread_id, "echo", { input: human(`m${i}`), multitaskStrategy: "enqueue" }));
    await fx.client.runs.join(t.thread_id, runs.at(-1)!.run_id);
    const ps = await s.until((p) => p.filter((x) => x.event === "run_end").length >= runs.length);
    const lifecycle = ps.filter((p) => p.event === "run_start" || p.event === "run_end");
    expect(lifecycle.map((p) => `${p.event}:${p.data.run_id}`)).toEqual(runs.flatMap((r) => [`run_start:${r.run_id}`, `run_end:${r.run_id}`]));
    let current: string | undefined;
    for (const p of ps) {
      if (p.event === "run_start") current = p.data.run_id;
      else if (p.event === "run_end") current = undefined;
      else expect(current, `${p.event} outside a run`).toBeDefined();
    }
    const values = ps.filter((p) => p.event === "values");
    expect(values.at(-1)?.data.messages).toHaveLength(2 * runs.length);
    expect(lifecycle.at(-1)?.data.thread_status).toBe("idle");
    expect((await fx.client.threads.get(t.thread_id)).status).toBe("idle");
    s.abort();
  });

  it("state_update: an event after threads.updateState, carrying the new checkpoint", async () => {
    const t = await fx.client.threads.create({ graphId: "echo" });
    const s = openStream(t.thread_id, { streamMode: ["state_update"] });
    await s.connected;
    const res = await fx.client.threads.updateState(t.thread_id, { values: human("edited"), asNode: "echo" });
    const [e] = await s.until((p) => p.length >= 1);
    expect(e.event).toBe("state_update");
    expect(e.data).toMatchObject({ thread_id: t.thread_id, as_node: "echo", values: human("edited") });
    expect(e.data.checkpoint.checkpoint_id).toBe(res.configurable?.checkpoint_id);
    // a run on the thread is not part of this mode
    await fx.client.runs.wait(t.thread_id, "echo", { input: human("x") });
    await fx.client.threads.updateState(t.thread_id, { values: human("again"), asNode: "echo" });
    const ps = await s.until((p) => p.length >= 2);
    expect(ps.map((p) => p.event)).toEqual(["state_update", "state_update"]);
    s.abort();
  });

  it("Last-Event-ID resumes after the last event seen, including events published while disconnected", async () => {
    const t = await fx.client.threads.create({ graphId: "echo" });
    const modes: ThreadStreamMode[] = ["run_modes", "lifecycle", "state_update"];
    const s1 = openStream(t.thread_id, { streamMode: modes });
    await s1.connected;
    await fx.client.runs.wait(t.thread_id, "echo", { input: human("r") });
    const seen = await s1.until((p) => p.some((x) => x.event === "run_end"));
    expect(seen.map((p) => p.event)).toEqual(["run_start", "metadata", "values", "values", "run_end"]);
    s1.abort();
    await s1.done.catch(() => undefined);
    await fx.client.threads.updateState(t.thread_id, { values: human("offline"), asNode: "echo" });

    const s2 = openStream(t.thread_id, { streamMode: modes, lastEventId: seen[1].id });
    const resumed = await s2.until((p) => p.some((x) => x.event === "state_update"));
    expect(resumed.map((p) => [p.id, p.event])).toEqual([...seen.slice(2).map((p) => [p.id, p.event]), [resumed.at(-1)!.id, "state_update"]]);
    expect(resumed.slice(0, 3).map((p) => p.data)).toEqual(seen.slice(2).map((p) => p.data));
    expect(increasing(ids(resumed))).toBe(true);
    s2.abort();

    // without the header nothing is replayed: the first event is the next new one
    const s3 = openStream(t.thread_id, { streamMode: modes });
    await s3.connected;
    await fx.client.threads.updateState(t.thread_id, { values: human("live"), asNode: "echo" });
    const live = await s3.until((p) => p.length >= 1);
    expect(live).toHaveLength(1);
    expect(live[0].data.values).toEqual(human("live"));
    expect(Number(live[0].id)).toBeGreaterThan(Number(resumed.at(-1)!.id));
    s3.abort();
  });

  it("answers 404 for an unknown thread and 422 for a bad stream_mode", async () => {
    const missing = "00000000-0000-4000-8000-000000000000";
    const r = await rawRequest(fx.server.url, `/threads/${missing}/stream`);
    expect(r.status).toBe(404);
    expect(r.body).toEqual({ detail: `Thread with ID ${missing} not found` });
    await expect(openStream(missing).done).rejects.toThrow(/HTTP 404/);

    const t = await fx.client.threads.create();
    const bad = await rawRequest(fx.server.url, `/threads/${t.thread_id}/stream?stream_mode=lifecycle&stream_mode=values`);
    expect(bad.status).toBe(422);
    expect(bad.body).toEqual({
      detail: [{ loc: ["query", "stream_mode", 1], msg: "Input should be 'run_modes', 'lifecycle' or 'state_update'", type: "enum" }],
    });
    await expect(openStream(t.thread_id, { streamMode: "nope" as ThreadStreamMode }).done).rejects.toThrow(/HTTP 422/);

    const doc = (await rawRequest(fx.server.url, "/openapi.json")).body as { paths: Record<string, { get?: { operationId: string } }> };
    expect(doc.paths["/threads/{thread_id}/stream"]?.get?.operationId).toBe("join_thread_stream");
  });

  it("an aborted client stream does not break later runs or later streams", async () => {
    const t = await fx.client.threads.create();
    const gone = openStream(t.thread_id, { streamMode: ["run_modes", "lifecycle"] });
    await gone.connected;
    gone.abort();
    await gone.done.catch(() => undefined);
    const out = (await fx.client.runs.wait(t.thread_id, "echo", { input: human("after abort") })) as { messages: { content: string }[] };
    expect(out.messages.at(-1)!.content).toBe("after abort");
    const s = openStream(t.thread_id, { streamMode: "lifecycle" });
    await s.connected;
    await fx.client.runs.wait(t.thread_id, "echo", { input: human("again") });
    const ps = await s.until((p) => p.length >= 2);
    expect(ps.map((p) => p.event)).toEqual(["run_start", "run_end"]);
    expect(gone.parts).toHaveLength(0); // the aborted consumer got nothing of the later runs
    s.abort();
  });

  it("ends the stream when the thread is deleted", async () => {
    const t = await fx.client.threads.create();
    const s = openStream(t.thread_id);
    await s.connected;
    await fx.client.threads.delete(t.thread_id);
    await expect(Promise.race([s.done.then(() => "ended"), new Promise((r) => setTimeout(() => r("still open"), 3_000))])).resolves.toBe("ended");
  });

  it("ends the stream when its assistant is deleted with delete_threads", async () => {
    const a = await fx.client.assistants.create({ graphId: "echo" });
    const t = await fx.client.threads.create();
    await fx.client.runs.wait(t.thread_id, a.assistant_id, { input: human("mine") });
    const s = openStream(t.thread_id);
    await s.connected;
    expect((await rawRequest(fx.server.url, `/assistants/${a.assistant_id}?delete_threads=true`, { method: "DELETE" })).status).toBe(200);
    await expect(Promise.race([s.done.then(() => "ended"), new Promise((r) => setTimeout(() => r("still open"), 3_000))])).resolves.toBe("ended");
    await expect(fx.client.threads.get(t.thread_id)).rejects.toThrow(/HTTP 404/);
  });
});

describe("ThreadStreamHub", () => {
  const collect = (hub: ThreadStreamHub, threadId: string, modes: ThreadStreamMode[], after?: number) => {
    const got: ThreadStreamEvent[] = [];
    let closed = false;
    const off = hub.subscribe(threadId, after, { modes: new Set(modes), onEvent: (e) => got.push(e), onClose: () => (closed = true) });
    return { got, off, closed: () => closed };
  };

  it("drops events of threads nobody listens to, filters by mode and numbers events increasingly", () => {
    const hub = new ThreadStreamHub();
    hub.publish("t", "run_modes", "values", "{}");
    expect(hub.size).toBe(0);
    const a = collect(hub, "t", ["lifecycle"]);
    const b = collect(hub, "t", ["run_modes", "lifecycle"]);
    hub.publish("t", "run_modes", "values", "1");
    hub.publish("t", "lifecycle", "run_end", "2");
    hub.publish("other", "lifecycle", "run_end", "3");
    expect(a.got.map((e) => e.data)).toEqual(["2"]);
    expect(b.got.map((e) => e.data)).toEqual(["1", "2"]);
    expect(b.got[1].id).toBeGreaterThan(b.got[0].id);
  });

  it("keeps a bounded buffer for resumption, and forgets it a while after the last listener left", async () => {
    const hub = new ThreadStreamHub({ maxEvents: 3, maxBytes: 10, retentionMs: 50 });
    const a = collect(hub, "t", ["run_modes"]);
    for (let i = 0; i < 5; i++) hub.publish("t", "run_modes", "custom", String(i));
    hub.publish("t", "run_modes", "custom", "123456789"); // 9 bytes: only "4" (1 byte) fits beside it
    expect(collect(hub, "t", ["run_modes"], 0).got.map((e) => e.data)).toEqual(["4", "123456789"]);
    hub.publish("t", "run_modes", "custom", "x".repeat(50)); // larger than the bound: kept alone
    expect(collect(hub, "t", ["run_modes"], -1).got.map((e) => e.data)).toEqual(["x".repeat(50)]);
    expect(a.got).toHaveLength(7);

    const hub2 = new ThreadStreamHub({ retentionMs: 50 });
    const s = collect(hub2, "t", ["run_modes"]);
    s.off();
    hub2.publish("t", "run_modes", "custom", "after-unsubscribe");
    expect(s.got).toHaveLength(0);
    expect(hub2.size).toBe(1); // within retention a reconnect can still resume
    await new Promise((r) => setTimeout(r, 120));
    expect(hub2.size).toBe(0);
  });

  it("close() ends every listener and a resubscribe starts fresh", () => {
    const hub = new ThreadStreamHub();
    const a = collect(hub, "t", ["run_modes"]);
    hub.publish("t", "run_modes", "custom", "1");
    hub.close("t");
    expect(a.closed()).toBe(true);
    expect(hub.size).toBe(0);
    hub.publish("t", "run_modes", "custom", "2");
    expect(a.got.map((e) => e.data)).toEqual(["1"]);
    a.off(); // unsubscribing after close is harmless
    expect(hub.size).toBe(0);
    expect(collect(hub, "t", ["run_modes"], -1).got).toHaveLength(0);
  });
});
