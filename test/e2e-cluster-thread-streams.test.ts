// Thread streams and thread-protocol sessions across nodes (docs/CLUSTER.md "Thread streams across
// nodes"): three real `troupe serve` processes on one PostgreSQL database, the real SDK. A client
// listening to a thread through one node sees the runs that execute on another — created through
// any node, before or after the client connected, on nodes that change between runs — exactly as
// a client of the node running them does (same events, same order), and resumes with Last-Event-ID.
import { Client } from "@langchain/langgraph-sdk";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { usePostgresDatabase } from "./helpers/postgres.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { waitUntil } from "./helpers/wait.ts";
import { readProtocolEvents, type SseFrame } from "./helpers/protocol-events.ts";

const db = usePostgresDatabase();
const NODE_IDS = ["node-a", "node-b", "node-c"];
const nodes: TestServer[] = [];
const clients: Client[] = [];
const [A, B, C] = [0, 1, 2];

const human = (content: string) => ({ messages: [{ role: "human", content }] });
const slow = (ms: number) => ({ configurable: { sleep_ms: ms } });
const weather = { messages: [{ role: "user", content: "What's the weather in Paris?" }] };

beforeAll(async () => {
  for (let i = 0; i < 3; i++) {
    nodes.push(
      await startTestServer({
        command: "serve",
        databaseUri: db.uri,
        workers: 1,
        extraArgs: ["--host", "127.0.0.1", "--node-id", NODE_IDS[i]],
        env: { TROUPE_CLUSTER_LEASE_TTL_MS: "6000" },
      }),
    );
    clients.push(new Client({ apiUrl: nodes[i].url, apiKey: null }));
  }
  for (const n of nodes) {
    await waitUntil(async () => ((await (await fetch(`${n.url}/info`)).json()) as { nodes_alive: number }).nodes_alive === 3 || undefined, {
      timeoutMs: 20_000,
      what: "three live nodes",
    });
  }
}, 120_000);

afterAll(async () => {
  if (process.env.TROUPE_TEST_DUMP) for (const n of nodes) console.log(n.output().slice(-6000));
  for (const n of nodes) await n.stop();
  for (const n of nodes) n.cleanup();
});

async function leaseHolder(threadId: string): Promise<string | undefined> {
  const c = new pg.Client({ connectionString: db.uri });
  await c.connect();
  try {
    const rows = (await c.query<{ node_id: string }>("SELECT node_id FROM thread_leases WHERE thread_id = $1 AND expires_at > now()", [threadId])).rows;
    return rows[0]?.node_id;
  } finally {
    await c.end();
  }
}

interface Part {
  id?: string;
  event: string;
  data: any;
}

/** client.threads.joinStream through node `i`: collects parts; `connected` once the server answered. */
function openStream(i: number, threadId: string, opts: { streamMode?: ("run_modes" | "lifecycle" | "state_update")[]; lastEventId?: string } = {}) {
  let onConnected!: () => void;
  const connected = new Promise<void>((r) => (onConnected = r));
  const client = new Client({
    apiUrl: nodes[i].url,
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
  const done = (async () => {
    try {
      for await (const p of client.threads.joinStream(threadId, { ...opts, signal: abort.signal })) parts.push(p as Part);
    } finally {
      onConnected();
    }
  })();
  const state = { ended: false };
  done.catch(() => undefined).finally(() => (state.ended = true));
  const until = (pred: (ps: Part[]) => boolean, what: string) =>
    waitUntil(() => (pred(parts) ? parts : undefined), { timeoutMs: 20_000, what: `${what}; got ${JSON.stringify(parts.map((p) => p.event))}` });
  return {
    parts,
    connected,
    until,
    close: () => abort.abort(),
    get ended() {
      return state.ended;
    },
  };
}

const runEnds = (ps: Part[]) => ps.filter((p) => p.event === "run_end").length;
/** What two streams must agree on: every event and its data, in order (ids are each node's own). */
const shape = (ps: Part[]) => ps.map((p) => [p.event, p.data]);
const ids = (ps: Part[]) => ps.map((p) => Number(p.id));
const increasing = (xs: number[]) => xs.every((x, i) => Number.isInteger(x) && (i === 0 || x > xs[i - 1]));

describe("thread streams across nodes", () => {
  it("a stream through B sees the runs executing on A, one created through C, as a stream on A does; Last-Event-ID resumes on B", async () => {
    const t = await clients[A].threads.create(); // through A: with or without an idle lease lingering there, A runs the first run
    const modes: ("run_modes" | "lifecycle")[] = ["run_modes", "lifecycle"];
    const onB = openStream(B, t.thread_id, { streamMode: modes });
    const onA = openStream(A, t.thread_id, { streamMode: modes });
    await Promise.all([onB.connected, onA.connected]);

    const first = await clients[A].runs.create(t.thread_id, "slow", { input: human("first"), config: slow(1_500), streamMode: ["values", "updates"] });
    expect(await leaseHolder(t.thread_id)).toBe("node-a");
    // created through C while A runs the first: forwarded to A, queued there
    const second = await clients[C].runs.create(t.thread_id, "echo", { input: human("second"), multitaskStrategy: "enqueue" });
    await clients[B].runs.join(t.thread_id, second.run_id);

    await onA.until((ps) => runEnds(ps) === 2, "both runs' ends on A");
    const parts = await onB.until((ps) => runEnds(ps) === 2, "both runs' ends on B");
    const events = parts.map((p) => p.event);
    expect(events[0]).toBe("run_start");
    expect(parts[0].data).toMatchObject({ run_id: first.run_id, attempt: 1 });
    expect(events).toContain("values");
    const end1 = parts.findIndex((p) => p.event === "run_end");
    expect(parts[end1].data).toMatchObject({ run_id: first.run_id, status: "success" });
    expect(parts[end1 + 1]).toMatchObject({ event: "run_start", data: { run_id: second.run_id } });
    expect(parts.at(-1)).toMatchObject({ event: "run_end", data: { run_id: second.run_id, status: "success", thread_status: "idle" } });
    expect(shape(parts)).toEqual(shape(onA.parts));
    expect(increasing(ids(parts))).toBe(true);

    // a client reconnecting to B after the first run's end gets the rest, as on one node
    const resumed = openStream(B, t.thread_id, { streamMode: modes, lastEventId: parts[end1].id });
    const rest = await resumed.until((ps) => runEnds(ps) === 1, "the resumed stream's run end");
    expect(shape(rest)).toEqual(shape(parts.slice(end1 + 1)));

    // the same Last-Event-ID through A (a load balancer sent the reconnect elsewhere): B, whose id it
    // is, serves the stream from its buffer (B's ids), then live
    const elsewhere = openStream(A, t.thread_id, { streamMode: modes, lastEventId: parts[end1].id });
    const replayed = [...(await elsewhere.until((ps) => runEnds(ps) === 1, "the resumed stream's run end through A"))];
    const seenOnB = parts.length;
    expect(replayed.map((p) => [p.id, p.event, p.data])).toEqual(parts.slice(end1 + 1).map((p) => [p.id, p.event, p.data]));
    const third = await clients[C].runs.create(t.thread_id, "echo", { input: human("third") });
    const live = await elsewhere.until((ps) => runEnds(ps) === 2, "the third run's end through A");
    expect(live.at(-1)).toMatchObject({ event: "run_end", data: { run_id: third.run_id } });
    const thirdOnB = (await onB.until((ps) => runEnds(ps) === 3, "the third run on B")).slice(seenOnB);
    expect(thirdOnB.length).toBeGreaterThan(2);
    expect(shape(live.slice(replayed.length))).toEqual(shape(thirdOnB));
    expect(increasing(ids(live))).toBe(true);
    for (const s of [onA, onB, resumed, elsewhere]) s.close();
  });

  it("a stream connected before the thread's first run sees runs on two nodes one after the other, in order, with state updates", async () => {
    const t = await clients[A].threads.create();
    const onB = openStream(B, t.thread_id, { streamMode: ["run_modes", "lifecycle", "state_update"] });
    await onB.connected;

    const first = await clients[A].runs.create(t.thread_id, "echo", { input: human("on A") });
    expect(await leaseHolder(t.thread_id)).toBe("node-a");
    await clients[A].runs.join(t.thread_id, first.run_id);
    // the thread goes idle on A; its lease is released, and the next run is taken by C
    await waitUntil(async () => (await leaseHolder(t.thread_id)) === undefined || undefined, { timeoutMs: 30_000, what: "A releasing the lease" });
    const second = await clients[C].runs.create(t.thread_id, "echo", { input: human("on C") });
    expect(await leaseHolder(t.thread_id)).toBe("node-c");
    await clients[C].runs.join(t.thread_id, second.run_id);
    await clients[A].threads.updateState(t.thread_id, { values: { messages: [{ role: "human", content: "patched", id: "patched" }] } });

    const parts = await onB.until((ps) => ps.some((p) => p.event === "state_update"), "the state update on B");
    const lifecycle = parts.filter((p) => p.event === "run_start" || p.event === "run_end").map((p) => [p.event, p.data.run_id]);
    expect(lifecycle).toEqual([
      ["run_start", first.run_id],
      ["run_end", first.run_id],
      ["run_start", second.run_id],
      ["run_end", second.run_id],
    ]);
    // each run's own events come between its start and its end
    const metadata = parts.filter((p) => p.event === "metadata").map((p) => p.data.run_id);
    expect(metadata).toEqual([first.run_id, second.run_id]);
    const values = parts.filter((p) => p.event === "values");
    expect(values.at(-1)?.data.messages.map((m: { content: string }) => m.content)).toEqual(["on A", "on A", "on C", "on C"]);
    expect(parts.at(-1)?.data).toMatchObject({ thread_id: t.thread_id });
    expect(increasing(ids(parts))).toBe(true);
    // the thread deleted through A: the stream on B ends, as on one node
    await clients[A].threads.delete(t.thread_id);
    await waitUntil(() => onB.ended || undefined, { timeoutMs: 20_000, what: "the stream on B ending" });
  });
});

describe("thread-protocol sessions across nodes", () => {
  it("a session subscribed through B (WebSocket, SDK) and an SSE subscription through C see the run started through A", async () => {
    const t = await clients[A].threads.create();
    const onB = clients[B].threads.stream(t.thread_id, { assistantId: "agent", transport: "websocket" });
    const valuesOnB = onB.values;
    const sse = readEvents(C, t.thread_id, { channels: ["lifecycle", "values"] }, (fs) =>
      fs.some((f) => f.event === "lifecycle" && f.data.params.namespace.length === 0 && f.data.params.data.event === "completed"),
    );
    await new Promise((r) => setTimeout(r, 500)); // both subscriptions are in (the SDK subscribes on first use)

    const onA = clients[A].threads.stream(t.thread_id, { assistantId: "agent" });
    await onA.run.start({ input: weather });
    expect(await leaseHolder(t.thread_id)).toBe("node-a");
    const finalOnA = await onA.values;
    const finalOnB = await valuesOnB;
    expect(finalOnB).toEqual(finalOnA);
    const frames = await sse;
    // the same events with the same ids as the session on A, the node running the run
    const onAFrames = await readEvents(A, t.thread_id, { channels: ["lifecycle", "values"] }, (fs) =>
      fs.some((f) => f.event === "lifecycle" && f.data.params.namespace.length === 0 && f.data.params.data.event === "completed"),
    );
    expect(frames.map((f) => [f.id, f.event, f.data])).toEqual(onAFrames.map((f) => [f.id, f.event, f.data]));
    await onA.close();
    await onB.close();
  });

  it("an interrupt answered through C: the session through B gets input.answered once, then the resumed run", async () => {
    const t = await clients[A].threads.create();
    const onA = clients[A].threads.stream(t.thread_id, { assistantId: "agent" });
    await onA.run.start({ input: weather, config: { configurable: { require_approval: true } } });
    await onA.values;
    expect(onA.interrupted).toBe(true);
    const [pending] = onA.interrupts;
    await onA.close();

    let opened!: () => void;
    const open = new Promise<void>((r) => (opened = r));
    const completed = (fs: Frame[]) =>
      fs.some((f) => f.event === "lifecycle" && f.data.params.namespace.length === 0 && f.data.params.data.event === "completed");
    const onB = readEvents(B, t.thread_id, { channels: ["lifecycle", "input", "values"] }, completed, 20_000, opened);
    await open;
    const onC = clients[C].threads.stream(t.thread_id, { assistantId: "agent" });
    await onC.input.respond({ interrupt_id: pending.interruptId, response: "approve", namespace: [] });
    const frames = await onB;
    const answered = frames.filter((f) => f.event === "input.answered");
    expect(answered).toHaveLength(1);
    expect(answered[0].data.params.data).toEqual({ interrupt_ids: [pending.interruptId] });
    // the resumed run's session opens with it, and ends with the run's final values
    const after = frames.slice(frames.indexOf(answered[0]));
    expect(after.some((f) => f.event === "lifecycle" && f.data.params.data.event === "completed")).toBe(true);
    const values = after.filter((f) => f.event === "values").at(-1);
    expect(JSON.stringify(values?.data.params.data.messages.at(-1))).toContain("According to get_weather: It is sunny and 21°C in Paris.");
    // every node's copy of the session is the same: the session on the node that ran it (replayed)
    for (const i of [A, B, C]) {
      const copy = await readEvents(i, t.thread_id, { channels: ["lifecycle", "input", "values"] }, completed);
      const fromAnswer = copy.slice(copy.findIndex((f) => f.event === "input.answered"));
      expect(
        fromAnswer.map((f) => [f.id, f.event, f.data]),
        `node ${i}`,
      ).toEqual(after.map((f) => [f.id, f.event, f.data]));
    }
    await onC.close();
  });
});

describe("a node killed under a thread's run", () => {
  it("a stream through B sees the run start on A, then resume on the node that took the thread over, and end", async () => {
    const t = await clients[A].threads.create();
    const onB = openStream(B, t.thread_id, { streamMode: ["run_modes", "lifecycle"] });
    await onB.connected;
    const run = await clients[A].runs.create(t.thread_id, "slow", { input: human("survive"), config: slow(3_000) });
    expect(await leaseHolder(t.thread_id)).toBe("node-a");
    await onB.until((ps) => ps.some((p) => p.event === "metadata"), "the run's first events on B");
    await nodes[A].kill();

    const parts = await waitUntil(() => (runEnds(onB.parts) === 1 ? onB.parts : undefined), {
      timeoutMs: 45_000,
      intervalMs: 250,
      what: "the run's end on B after the takeover",
    });
    const lifecycle = parts.filter((p) => p.event === "run_start" || p.event === "run_end").map((p) => [p.event, p.data.run_id, p.data.attempt]);
    expect(lifecycle).toEqual([
      ["run_start", run.run_id, 1],
      ["run_start", run.run_id, 2],
      ["run_end", run.run_id, undefined],
    ]);
    expect(parts.at(-1)?.data).toMatchObject({ status: "success", thread_status: "idle" });
    const attempts = parts.filter((p) => p.event === "metadata").map((p) => p.data.attempt);
    expect(attempts).toEqual([1, 2]);
    expect((await clients[C].runs.get(t.thread_id, run.run_id)).status).toBe("success");
    onB.close();
  }, 90_000);
});

type Frame = SseFrame;

/** POST /threads/{t}/stream/events through node `i`; frames until `until` holds. */
const readEvents = (i: number, threadId: string, body: unknown, until: (fs: Frame[]) => boolean, timeoutMs = 20_000, onOpen?: () => void): Promise<Frame[]> =>
  readProtocolEvents(nodes[i].url, threadId, body, until, { timeoutMs, onOpen });
