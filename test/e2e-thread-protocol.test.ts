// The thread-centric protocol (reference §13) through the real SDK (`client.threads.stream`, SSE
// and WebSocket transports) against a spawned server, plus raw HTTP for the wire details
// (filters, since, ids, errors); and the ThreadProtocolHub / ProtocolEventShaper on their own.
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { Client } from "@langchain/langgraph-sdk";
import { Command } from "@langchain/langgraph";
import { RemoteGraph } from "@langchain/langgraph/remote";
import { matchesSubscription } from "@langchain/langgraph-sdk/client";
import { ThreadProtocolHub, matchesFilter, type ProtocolFilter, type ProtocolFrame } from "../src/hub/thread-protocol-hub.ts";
import { ProtocolEventShaper, protocolEventName, type ProtocolEventLike } from "../src/actors/thread-protocol-run.ts";
import { rawRequest, useServer } from "./helpers/suite.ts";
import { waitUntil } from "./helpers/wait.ts";
import { readProtocolEvents, type SseFrame } from "./helpers/protocol-events.ts";

const fx = useServer();

const weather = { messages: [{ role: "user", content: "What's the weather in Paris?" }] };
const approval = { configurable: { require_approval: true } };

type Transport = "sse" | "websocket";
const open = (transport: Transport, threadId?: string) => {
  const options = { assistantId: "agent", ...(transport === "websocket" ? { transport: "websocket" as const } : {}) };
  return threadId ? fx.client.threads.stream(threadId, options) : fx.client.threads.stream(options);
};

type Frame = SseFrame;

/** POST /threads/{t}/stream/events and collect frames until `until` holds (then the request is aborted). */
const readEvents = (threadId: string, body: unknown, until: (fs: Frame[]) => boolean, timeoutMs = 8_000): Promise<Frame[]> =>
  readProtocolEvents(fx.server.url, threadId, body, until, { timeoutMs });

const command = (threadId: string, body: unknown) =>
  rawRequest(fx.server.url, `/threads/${threadId}/commands`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

const rootEnd = (fs: Frame[]) =>
  fs.some((f) => f.event === "lifecycle" && f.data.params.namespace.length === 0 && ["completed", "failed", "interrupted"].includes(f.data.params.data.event));

const lastText = (values: unknown): string => {
  const content = (values as { messages: { content: unknown }[] }).messages.at(-1)?.content;
  return typeof content === "string" ? content : (content as { text?: string }[]).map((b) => b.text ?? "").join("");
};

describe.each(["sse", "websocket"] as const)("client.threads.stream over %s", (transport) => {
  it("run.start creates the thread, streams values, messages and tool calls, and ends with the final state", async () => {
    const thread = open(transport);
    // The projections subscribe before the run starts: the SDK ends a projection whose replay
    // arrives after the run's terminal event (its "terminal pause"), which a loaded machine's
    // slow subscribe after a fast run reaches (seen in CI: no tool calls).
    const texts: Promise<string>[] = [];
    const messages = (async () => {
      for await (const m of thread.messages) texts.push(Promise.resolve(m.text));
    })();
    const tools: string[] = [];
    const toolCalls = (async () => {
      for await (const tc of thread.toolCalls) tools.push(tc.name);
    })();
    const finalValues = thread.values;
    const { run_id } = await thread.run.start({ input: weather });
    const final = await finalValues;
    await Promise.race([Promise.all([messages, toolCalls]), new Promise((r) => setTimeout(r, 1_000))]);
    expect(lastText(final)).toBe("According to get_weather: It is sunny and 21°C in Paris.");
    expect(await Promise.all(texts)).toContain("According to get_weather: It is sunny and 21°C in Paris.");
    expect(tools).toContain("get_weather");
    expect(thread.interrupted).toBe(false);
    // the classic API sees the same thread and run
    const t = await fx.client.threads.get(thread.threadId);
    expect(t.status).toBe("idle");
    expect(t.metadata).toMatchObject({ graph_id: "agent" });
    const runs = await fx.client.runs.list(thread.threadId);
    expect(runs.map((r) => [r.run_id, r.status])).toEqual([[run_id, "success"]]);
    const state = await thread.state.get({ namespace: [] });
    expect(state.values).toEqual((await fx.client.threads.getState(thread.threadId)).values);
    expect(state.checkpoint?.id).toBe((await fx.client.threads.getState(thread.threadId)).checkpoint.checkpoint_id);
    await thread.close();
  });

  it("an interrupt() reaches the client as an interrupt; input.respond resumes the run on a new stream", async () => {
    const thread = open(transport);
    await thread.run.start({ input: weather, config: approval });
    await thread.values;
    expect(thread.interrupted).toBe(true);
    expect(thread.interrupts).toHaveLength(1);
    const [pending] = thread.interrupts;
    expect(pending.payload).toMatchObject({ question: "Approve these tool calls?", tool_calls: [{ name: "get_weather", args: { city: "Paris" } }] });
    // the interrupted lifecycle arrives only once the thread is interrupted: a client may respond at once
    expect((await fx.client.threads.get(thread.threadId)).status).toBe("interrupted");
    await expect(thread.input.respond({ interrupt_id: "0".repeat(32), response: "approve", namespace: [] })).rejects.toMatchObject({
      code: "no_such_interrupt",
    });
    await thread.close();

    const resumed = open(transport, thread.threadId);
    await resumed.input.respond({ interrupt_id: pending.interruptId, response: "approve", namespace: [] });
    const final = await resumed.values;
    expect(lastText(final)).toBe("According to get_weather: It is sunny and 21°C in Paris.");
    expect((await fx.client.threads.get(thread.threadId)).status).toBe("idle");
    await expect(resumed.input.respond({ interrupt_id: pending.interruptId, response: "again", namespace: [] })).rejects.toMatchObject({
      code: "invalid_argument",
    });
    await resumed.close();
  });
});

describe('RemoteGraph.streamEvents({version: "v3"})', () => {
  it("runs a remote graph, surfaces its interrupt, and resumes it with a Command", async () => {
    const remote = new RemoteGraph({ graphId: "agent", client: fx.client });
    const t = await fx.client.threads.create();
    type V3Run = { output: Promise<{ messages: unknown[] }>; interrupted: boolean; interrupts: { interruptId: string; payload: unknown }[] };
    const first = (await remote.streamEvents(weather, {
      version: "v3",
      configurable: { thread_id: t.thread_id, require_approval: true },
    } as never)) as unknown as V3Run;
    expect((await first.output).messages).toHaveLength(2);
    expect(first.interrupted).toBe(true);
    const [pending] = first.interrupts;
    expect(pending.payload).toMatchObject({ question: "Approve these tool calls?" });
    const second = (await remote.streamEvents(new Command({ resume: { [pending.interruptId]: "approve" } }), {
      version: "v3",
      configurable: { thread_id: t.thread_id },
    } as never)) as unknown as V3Run;
    const out = await second.output;
    expect(lastText(out)).toBe("According to get_weather: It is sunny and 21°C in Paris.");
    expect(second.interrupted).toBe(false);
    expect((await fx.client.threads.get(t.thread_id)).status).toBe("idle");
  });
});

describe("thread-centric protocol over HTTP", () => {
  it("numbers events with increasing ids (id = event_id = seq), names them by method, and replays the run's session", async () => {
    const thread = open("sse");
    await thread.run.start({ input: weather });
    await thread.values; // its streams stay open (and keep the session) until close() below
    const all = await readEvents(thread.threadId, { channels: ["values", "lifecycle", "messages", "tools", "updates", "checkpoints", "tasks"] }, rootEnd);
    const ids = all.map((f) => Number(f.id));
    expect(ids.every((id, i) => Number.isSafeInteger(id) && (i === 0 || id > ids[i - 1]))).toBe(true);
    for (const f of all) {
      expect(f.data).toMatchObject({ type: "event", event_id: f.id, seq: Number(f.id), method: f.event });
      expect(Array.isArray(f.data.params.namespace)).toBe(true);
    }
    expect(new Set(all.map((f) => f.event))).toEqual(new Set(["lifecycle", "checkpoints", "values", "tasks", "messages", "updates", "tools"]));
    const root = all.filter((f) => f.event === "lifecycle" && f.data.params.namespace.length === 0).map((f) => f.data.params.data);
    expect(root.at(0)).toMatchObject({ event: "running", graph_name: "agent" });
    expect(root.at(-1)).toMatchObject({ event: "completed", graph_name: "agent" });
    // checkpoints carry the envelope only
    const cp = all.find((f) => f.event === "checkpoints")!.data.params.data;
    expect(Object.keys(cp).sort()).toEqual(expect.arrayContaining(["id", "source", "step"]));

    // since: only what came after
    const middle = ids[Math.floor(ids.length / 2)];
    const rest = await readEvents(
      thread.threadId,
      { channels: ["values", "lifecycle", "messages", "tools", "updates", "checkpoints", "tasks"], since: middle },
      rootEnd,
    );
    expect(rest.map((f) => Number(f.id))).toEqual(ids.filter((id) => id > middle));

    // namespace filters: root lifecycle only (depth 0), and one subgraph prefix by its name
    const rootOnly = await readEvents(thread.threadId, { channels: ["lifecycle"], namespaces: [[]], depth: 0 }, rootEnd);
    expect(rootOnly.every((f) => f.data.params.namespace.length === 0)).toBe(true);
    expect(rootOnly.map((f) => f.data.params.data.event)).toEqual(["running", "completed"]);
    const toolsNs = await readEvents(thread.threadId, { channels: ["tools", "lifecycle"], namespaces: [["tools"]] }, (fs) =>
      fs.some((f) => f.event === "tools" && f.data.params.data.event === "tool-finished"),
    );
    expect(toolsNs.length).toBeGreaterThan(0);
    expect(toolsNs.every((f) => f.data.params.namespace[0].startsWith("tools:"))).toBe(true);
    expect(toolsNs.filter((f) => f.event === "tools").map((f) => f.data.params.data.event)).toEqual(["tool-started", "tool-finished"]);

    // the run is over and its last reader leaves: the session goes, a new stream replays nothing
    await thread.close();
    await new Promise((r) => setTimeout(r, 200));
    const after = await readEvents(thread.threadId, { channels: ["lifecycle", "values"] }, () => false, 1_000).catch((e: Error) => e.message);
    expect(after).toBe("timed out; got []");
  });

  it("answers commands with envelopes: success with meta, unknown commands, bad arguments, a thread bound to its assistant", async () => {
    const thread = open("sse");
    await thread.run.start({ input: weather });
    await thread.values;
    const tid = thread.threadId;
    const st = await command(tid, { id: 7, method: "state.get", params: { namespace: [], keys: ["messages"] } });
    expect(st.status).toBe(200);
    expect(st.body).toMatchObject({ type: "success", id: 7, meta: { thread_id: tid }, result: { checkpoint: { id: expect.any(String), ns: "" } } });
    expect(Object.keys((st.body as { result: { values: object } }).result.values)).toEqual(["messages"]);
    expect(typeof (st.body as { meta: { applied_through_seq?: number } }).meta.applied_through_seq).toBe("number");

    expect((await command(tid, { id: 1, method: "nope.nothing" })).body).toMatchObject({ type: "error", id: 1, error: "unknown_command" });
    expect((await command(tid, { id: 2, method: "run.start", params: {} })).body).toMatchObject({
      type: "error",
      id: 2,
      error: "invalid_argument",
      message: "params.assistant_id: Field required",
    });
    expect((await command(tid, { id: 2, method: "state.listCheckpoints", params: { limit: 0, before: 5 } })).body).toMatchObject({
      type: "error",
      error: "invalid_argument",
      message: "params.limit: Input should be greater than or equal to 1; params.before: Input should be a valid string",
    });
    expect((await command(tid, { id: 2, method: "input.respond", params: { responses: [{ response: 1 }] } })).body).toMatchObject({
      error: "invalid_argument",
      message: "params.responses.0.interrupt_id: Field required",
    });
    expect((await command(tid, { id: 3, method: "run.start", params: { assistant_id: "echo", input: {} } })).body).toMatchObject({
      type: "error",
      error: "invalid_argument",
      message: expect.stringContaining("bound to assistant"),
    });
    expect((await command(tid, { id: 4, method: "run.start", params: { assistant_id: "no-such-graph" } })).body).toMatchObject({
      type: "error",
      error: "invalid_argument",
    });

    // two concurrent first runs with different assistants: the thread's actor binds it to one
    const fresh = randomUUID();
    const raced = await Promise.all([
      command(fresh, { id: 10, method: "run.start", params: { assistant_id: "echo", input: { messages: [{ role: "human", content: "a" }] } } }),
      command(fresh, { id: 11, method: "run.start", params: { assistant_id: "agent", input: { messages: [{ role: "human", content: "b" }] } } }),
    ]);
    const kinds = raced.map((r) => (r.body as { type: string }).type).sort();
    expect(kinds).toEqual(["error", "success"]);
    expect(raced.find((r) => (r.body as { type: string }).type === "error")!.body).toMatchObject({
      error: "invalid_argument",
      message: expect.stringContaining("bound to assistant"),
    });
    expect((await command(tid, { id: 5, method: "subscription.reconnect", params: { run_id: "x" } })).body).toMatchObject({
      type: "error",
      error: "not_supported",
    });
    expect((await command(tid, { id: 6, method: "state.get", params: { namespace: ["agent"] } })).body).toMatchObject({
      type: "error",
      error: "no_such_namespace",
    });
    expect((await command(tid, { id: 8, method: "agent.getTree", params: { run_id: "other" } })).body).toMatchObject({ type: "error", error: "no_such_run" });
    const tree = (await command(tid, { id: 9, method: "agent.getTree" })).body as {
      result: { tree: { status: string; graph_name: string; children: { namespace: string[]; status: string }[] } };
    };
    expect(tree.result.tree).toMatchObject({ namespace: [], status: "completed", graph_name: "agent" });
    expect(tree.result.tree.children.map((c) => c.namespace[0].split(":")[0])).toEqual(["agent", "tools", "agent"]);
    expect(tree.result.tree.children.every((c) => c.status === "completed")).toBe(true);
    const missing = "00000000-0000-4000-8000-000000000001";
    expect((await command(missing, { id: 10, method: "state.get", params: { namespace: [] } })).body).toMatchObject({
      type: "error",
      error: "invalid_argument",
      message: expect.stringContaining("not found"),
    });

    // the envelope itself is validated like any body
    const bad = await command(tid, { method: "state.get" });
    expect(bad.status).toBe(422);
    expect((bad.body as { detail: { loc: string[] }[] }).detail[0].loc).toEqual(["body", "id"]);
    await thread.close();
  });

  it("accepts one of two concurrent answers to the same interrupt (input.respond defaults to multitask reject)", async () => {
    const thread = open("sse");
    await thread.run.start({ input: weather, config: approval });
    await thread.values;
    const [pending] = thread.interrupts;
    await thread.close();
    const respond = (id: number) =>
      command(thread.threadId, { id, method: "input.respond", params: { interrupt_id: pending.interruptId, response: "approve" } });
    const answers = (await Promise.all([respond(1), respond(2)])).map((r) => r.body as { type: string; error?: string });
    expect(answers.map((a) => a.type).sort()).toEqual(["error", "success"]);
    expect(answers.find((a) => a.type === "error")?.error).toBe("invalid_argument");
    await readEvents(thread.threadId, { channels: ["lifecycle"], namespaces: [[]], depth: 0 }, rootEnd);
    const runs = await fx.client.runs.list(thread.threadId);
    expect(runs).toHaveLength(2); // the interrupted run and one resume
  });

  it("lists checkpoints and forks a run from one of them", async () => {
    const thread = open("sse");
    await thread.run.start({ input: { messages: [{ role: "user", content: "first" }] } });
    await thread.values;
    const { checkpoints } = await thread.state.listCheckpoints({ limit: 10 });
    expect(checkpoints.length).toBeGreaterThan(1);
    expect(checkpoints[0]).toMatchObject({ id: expect.any(String), step: expect.any(Number), timestamp: expect.any(String) });
    const steps = checkpoints.map((c) => c.step);
    expect(steps).toEqual([...steps].sort((a, b) => b - a)); // newest first
    const older = await thread.state.listCheckpoints({ limit: 10, before: checkpoints[0].id });
    expect(older.checkpoints.map((c) => c.id)).toEqual(checkpoints.slice(1).map((c) => c.id));
    await thread.close();

    // fork from the checkpoint that holds only the first human message: the new run answers "second"
    const withInput = checkpoints.find((c) => c.step === 0)!;
    const forked = await command(thread.threadId, {
      id: 1,
      method: "state.fork",
      params: { checkpoint_id: withInput.id, input: { messages: [{ role: "user", content: "second" }] } },
    });
    expect(forked.body).toMatchObject({ type: "success", result: { run_id: expect.any(String), thread_id: thread.threadId } });
    await readEvents(thread.threadId, { channels: ["lifecycle"], namespaces: [[]], depth: 0 }, rootEnd);
    const state = await fx.client.threads.getState(thread.threadId);
    const contents = (state.values as { messages: { content: unknown }[] }).messages.map((m) =>
      typeof m.content === "string" ? m.content : lastText({ messages: [m] }),
    );
    expect(contents).toEqual(["first", "second", "You said: second"]);
  });

  it("rejects bad stream requests: unknown thread 404, a strict body 422, a GET without upgrade 426", async () => {
    const missing = "00000000-0000-4000-8000-000000000002";
    const notFound = await rawRequest(fx.server.url, `/threads/${missing}/stream/events`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ channels: ["values"] }),
    });
    expect(notFound.status).toBe(404);
    expect(notFound.body).toEqual({ detail: `Thread with ID ${missing} not found` });
    const t = await fx.client.threads.create();
    for (const body of [{}, { channels: [] }, { channels: ["nope"] }, { channels: ["values"], extra: 1 }, { channels: ["values"], since: -1 }]) {
      const r = await rawRequest(fx.server.url, `/threads/${t.thread_id}/stream/events`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      expect(r.status, JSON.stringify(body)).toBe(422);
    }
    const get = await rawRequest(fx.server.url, `/threads/${t.thread_id}/stream/events`);
    expect(get.status).toBe(426);
  });

  it("ends open streams when the thread is deleted", async () => {
    const t = await fx.client.threads.create();
    const reading = readEvents(t.thread_id, { channels: ["values"] }, () => false, 8_000);
    await new Promise((r) => setTimeout(r, 300));
    await fx.client.threads.delete(t.thread_id);
    await expect(reading).resolves.toEqual([]);
  });
});

describe("thread-centric protocol over a WebSocket (raw)", () => {
  it("subscribes, replays the session once per event, unsubscribes, and refuses unknown subscriptions", async () => {
    const thread = open("sse");
    await thread.run.start({ input: weather });
    await thread.values; // stays open: keeps the session for the socket below
    const ws = new WebSocket(`${fx.server.url.replace("http", "ws")}/threads/${thread.threadId}/stream/events`);
    const messages: any[] = [];
    ws.addEventListener("message", (e) => messages.push(JSON.parse(String(e.data))));
    await new Promise((r, j) => (ws.addEventListener("open", r), ws.addEventListener("error", j)));
    const reply = (id: number) => waitUntil(() => messages.find((m) => m.id === id && m.type !== "event"), { what: `the reply to command ${id}` });
    ws.send(JSON.stringify({ id: 1, method: "subscription.subscribe", params: { channels: ["lifecycle"], namespaces: [[]], depth: 0 } }));
    const sub = await reply(1);
    expect(sub).toMatchObject({ type: "success", result: { subscription_id: expect.any(String), replayed_events: 2 } });
    ws.send(JSON.stringify({ id: 2, method: "subscription.subscribe", params: { channels: ["lifecycle", "values"] } }));
    expect(await reply(2)).toMatchObject({ type: "success" });
    const events = messages.filter((m) => m.type === "event");
    expect(events.filter((e) => e.method === "values").length).toBeGreaterThan(0);
    ws.send(JSON.stringify({ id: 3, method: "subscription.unsubscribe", params: { subscription_id: sub.result.subscription_id } }));
    expect(await reply(3)).toMatchObject({ type: "success" });
    ws.send(JSON.stringify({ id: 4, method: "subscription.unsubscribe", params: { subscription_id: "sub-999" } }));
    expect(await reply(4)).toMatchObject({ type: "error", error: "no_such_subscription" });
    ws.send(JSON.stringify({ id: 5, method: "subscription.subscribe", params: { channels: ["nope"] } }));
    expect(await reply(5)).toMatchObject({ type: "error", error: "invalid_argument", message: expect.stringContaining("params.channels.0") });
    ws.send(JSON.stringify({ id: -1, method: "state.get" }));
    const badId = await waitUntil(() => messages.find((m) => m.type === "error" && String(m.message).startsWith("command.id")), { what: "the bad id's error" });
    expect(badId).toMatchObject({ id: null, error: "invalid_argument" });
    ws.send("not json");
    const notJson = await waitUntil(() => messages.find((m) => m.id === null && String(m.message).startsWith("A command")), {
      what: "the non-JSON frame's error",
    });
    expect(notJson).toMatchObject({ type: "error", error: "invalid_argument" });
    ws.close();
    await thread.close();
  });

  it("closes with 4404 when the thread is hidden or deleted", async () => {
    const t = await fx.client.threads.create();
    const ws = new WebSocket(`${fx.server.url.replace("http", "ws")}/threads/${t.thread_id}/stream/events`);
    const closed = new Promise<number>((r) => ws.addEventListener("close", (e) => r(e.code)));
    await new Promise((r) => ws.addEventListener("open", r));
    ws.send(JSON.stringify({ id: 1, method: "subscription.subscribe", params: { channels: ["values"] } }));
    await new Promise((r) => setTimeout(r, 200));
    await fx.client.threads.delete(t.thread_id);
    expect(await closed).toBe(4404);
  });
});

describe("ThreadProtocolHub", () => {
  const ev = (method: string, namespace: string[], data: unknown, channel = method): { id: number; event: string; data: string } => ({
    id: 0,
    event: protocolEventName(method, channel, namespace),
    data: JSON.stringify({ type: "event", method, params: { namespace, timestamp: 1, data } }),
  });
  const collect = (hub: ThreadProtocolHub, threadId: string, filter: ProtocolFilter, since?: number) => {
    const got: ProtocolFrame[] = [];
    const { unsubscribe, replayed } = hub.subscribe(threadId, since, { filter, onEvent: (f) => got.push(f), onClose: () => undefined });
    return { got, unsubscribe, replayed };
  };

  it("filters like the SDK's matchesSubscription", () => {
    const cases: [ProtocolFilter, string, string, string[], unknown][] = [
      [{ channels: ["values"] }, "values", "values", [], {}],
      [{ channels: ["values"] }, "updates", "updates", [], {}],
      [{ channels: ["custom"] }, "custom", "custom:a2a", [], { name: "a2a" }],
      [{ channels: ["custom:a2a"] }, "custom", "custom:a2a", [], { name: "a2a" }],
      [{ channels: ["custom:b"] }, "custom", "custom:a2a", [], { name: "a2a" }],
      [{ channels: ["input"] }, "input.requested", "input", [], {}],
      [{ channels: ["lifecycle"], namespaces: [["tools"]] }, "lifecycle", "lifecycle", ["tools:abc"], {}],
      [{ channels: ["lifecycle"], namespaces: [["tools:abc"]] }, "lifecycle", "lifecycle", ["tools:abd"], {}],
      [{ channels: ["lifecycle"], namespaces: [["a"]], depth: 0 }, "lifecycle", "lifecycle", ["a:1", "b:2"], {}],
      [{ channels: ["lifecycle"], namespaces: [["a"]], depth: 1 }, "lifecycle", "lifecycle", ["a:1", "b:2"], {}],
      [{ channels: ["lifecycle"], namespaces: [[]], depth: 0 }, "lifecycle", "lifecycle", [], {}],
      [{ channels: ["lifecycle"], namespaces: [[]], depth: 0 }, "lifecycle", "lifecycle", ["x"], {}],
    ];
    for (const [filter, method, channel, namespace, data] of cases) {
      const sdk = matchesSubscription({ type: "event", method, params: { namespace, timestamp: 1, data } } as never, filter as never);
      expect(matchesFilter(filter, channel, namespace), JSON.stringify([filter, channel, namespace])).toBe(sdk);
    }
  });

  it("holds the root's input.requested and terminal lifecycle until the run's end is committed", () => {
    const hub = new ThreadProtocolHub();
    hub.adopt("t", "run-1");
    const { got } = collect(hub, "t", { channels: ["lifecycle", "input", "values"] });
    hub.publish("t", "run-1", [
      ev("lifecycle", [], { event: "running" }),
      ev("values", [], { x: 1 }),
      ev("input.requested", [], { interrupt_id: "i", payload: 1 }, "input"),
      ev("lifecycle", [], { event: "interrupted" }),
    ]);
    expect(got.map((f) => f.method)).toEqual(["lifecycle", "values"]);
    hub.ended("t", "run-1", "success");
    expect(got.map((f) => f.method)).toEqual(["lifecycle", "values", "input.requested", "lifecycle"]);
    expect(got.map((f) => f.seq)).toEqual([...got.map((f) => f.seq)].sort((a, b) => a - b));
  });

  it("opens a resume run's session with input.answered, also when the run starts before its create reply", () => {
    const hub = new ThreadProtocolHub();
    hub.adopt("t", "run-1");
    const { got } = collect(hub, "t", { channels: ["lifecycle", "input"] });
    const opener = hub.announceWhenAdopted("run-2", "input.answered", "input", { interrupt_ids: ["i"] });
    hub.started("t", "run-2", 1); // the worker's run.start came first
    hub.publish("t", "run-2", [ev("lifecycle", [], { event: "running" })]);
    hub.adopt("t", "run-2"); // then the create reply: nothing new
    expect(got.map((f) => f.method)).toEqual(["input.answered", "lifecycle"]);
    const cancelled = hub.announceWhenAdopted("run-3", "input.answered", "input", { interrupt_ids: ["j"] });
    cancelled.cancel(); // its create failed
    hub.adopt("t", "run-3");
    expect(got.map((f) => f.method)).toEqual(["input.answered", "lifecycle"]);
    opener.cancel(); // after delivery: harmless
  });

  it("ends a run whose root never ended with a failed lifecycle; a newer run's session is not replaced by an older one", () => {
    const hub = new ThreadProtocolHub();
    hub.adopt("t", "run-2");
    hub.started("t", "run-1", 1); // an older run (recovered, or queued before) does not take over
    hub.publish("t", "run-1", [ev("values", [], { old: true })]);
    const { got, replayed } = collect(hub, "t", { channels: ["lifecycle", "values"] });
    expect(replayed).toBe(0);
    hub.publish("t", "run-2", [ev("values", [], { x: 2 })]);
    hub.ended("t", "run-2", "interrupted");
    expect(got.map((f) => JSON.parse(f.data).params.data)).toEqual([
      { x: 2 },
      { event: "failed", graph_name: "root", error: "Run ended with status interrupted" },
    ]);
    // a late reader replays the session; since skips what it saw
    const late = collect(hub, "t", { channels: ["values", "lifecycle"] }, got[0].seq);
    expect(late.got.map((f) => f.seq)).toEqual([got[1].seq]);
  });

  it("keeps an ended session nobody read for a late reader, and drops it when its last reader leaves", () => {
    const hub = new ThreadProtocolHub({ retentionMs: 60_000 });
    hub.adopt("t", "run-1");
    hub.publish("t", "run-1", [ev("values", [], { x: 1 }), ev("lifecycle", [], { event: "completed" })]);
    hub.ended("t", "run-1", "success");
    const first = collect(hub, "t", { channels: ["values", "lifecycle"] });
    const second = collect(hub, "t", { channels: ["values"] });
    expect([first.replayed, second.replayed]).toEqual([2, 1]);
    first.unsubscribe();
    expect(collect(hub, "t", { channels: ["values"] }).replayed).toBe(1); // still listened to by `second` (and this one)
    expect(hub.size).toBe(1);
  });

  it("drops a finished session when its last reader leaves", () => {
    const hub = new ThreadProtocolHub();
    hub.adopt("t", "run-1");
    const reader = collect(hub, "t", { channels: ["values"] });
    hub.publish("t", "run-1", [ev("values", [], { x: 1 })]);
    hub.ended("t", "run-1", "success");
    reader.unsubscribe();
    expect(hub.size).toBe(0);
    expect(collect(hub, "t", { channels: ["values"] }).replayed).toBe(0);
  });
});

describe("ProtocolEventShaper", () => {
  const lifecycle = (event: string, namespace: string[] = []): ProtocolEventLike => ({
    method: "lifecycle",
    params: { namespace, timestamp: 1, data: { event, graph_name: namespace.length ? "sub" : "root" } },
  });

  it("turns LangGraph's interrupt chunk into input.requested + an interrupted root, and names the root after the graph", () => {
    const out: [string, ProtocolEventLike][] = [];
    const shaper = new ProtocolEventShaper((channel, ev) => out.push([channel, ev]), "agent");
    shaper.push(lifecycle("running"));
    shaper.push({ method: "values", params: { namespace: [], timestamp: 1, data: { x: 1 } } });
    shaper.push({ method: "updates", params: { namespace: [], timestamp: 1, node: "__interrupt__", data: { node: "__interrupt__", values: [] } } });
    shaper.push({ method: "values", params: { namespace: [], timestamp: 2, data: { __interrupt__: [{ id: "abc", value: { q: 1 } }] } } });
    shaper.push({ method: "custom", params: { namespace: ["sub:1"], timestamp: 2, data: { name: "progress", payload: 1 } } });
    shaper.push(lifecycle("completed"));
    expect(out.map(([channel, e]) => [channel, e.method, (e.params.data as { event?: string }).event])).toEqual([
      ["lifecycle", "lifecycle", "running"],
      ["values", "values", undefined],
      ["custom:progress", "custom", undefined],
      ["input", "input.requested", undefined],
      ["lifecycle", "lifecycle", "interrupted"],
    ]);
    expect(out[3][1].params.data).toEqual({ interrupt_id: "abc", payload: { q: 1 } });
    expect((out[4][1].params.data as { graph_name: string }).graph_name).toBe("agent");
    expect(shaper.lastRootValues?.payload).toEqual({ __interrupt__: [{ id: "abc", value: { q: 1 } }] });
    expect(shaper.ended).toBe(true);
  });
});

describe("client with the default transport and an unknown thread", () => {
  it("a fresh SDK client can open a stream on an existing thread and read its state", async () => {
    const client = new Client({ apiUrl: fx.server.url, apiKey: null });
    const t = await client.threads.create({ graphId: "agent" });
    const thread = client.threads.stream(t.thread_id, { assistantId: "agent" });
    const st = await thread.state.get({ namespace: [] });
    expect(st.values).toEqual({});
    await thread.close();
  });
});
