// Graph features end to end through the SDK and RemoteGraph: factories, stream modes, subgraphs,
// interrupt_before/after, history, state updates, rollback, the store, and a user project that
// brings its own copy of LangGraph in its own node_modules.
import { describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import { Command } from "@langchain/langgraph";
import { RemoteGraph } from "@langchain/langgraph/remote";
import { startTestServer } from "./helpers/server.ts";
import { human, useServer } from "./helpers/suite.ts";
import { waitUntil } from "./helpers/wait.ts";
import { makeUserProject } from "./fixtures/make-user-project.ts";

const fx = useServer();

async function collect(it: AsyncIterable<{ event: string; data: unknown }>) {
  const out: { event: string; data: unknown }[] = [];
  for await (const e of it) out.push(e);
  return out;
}

describe("graph exports", () => {
  it("runs factory and uncompiled StateGraph exports", async () => {
    const f = (await fx.client.runs.wait(null, "factory", { input: { messages: ["a"] } })) as Record<string, unknown>;
    expect(JSON.stringify(f)).toContain("factory");
    const u = await fx.client.runs.wait(null, "uncompiled", { input: human("u") });
    expect(u).toBeTruthy();
  });
});

describe("stream modes", () => {
  it("hands the graph its assistant's context merged with the run's, and stores the run's metadata in its config", async () => {
    const a = await fx.client.assistants.create({ graphId: "context", context: { model: "from-assistant", temperature: 0 } });
    const t = await fx.client.threads.create();
    const answer = async (extra: Record<string, unknown>) => {
      const out = (await fx.client.runs.wait(t.thread_id, a.assistant_id, { input: human("?"), ...extra })) as { messages: { content: string }[] };
      return JSON.parse(out.messages.at(-1)!.content) as unknown;
    };
    expect(await answer({})).toEqual({ model: "from-assistant", temperature: 0 });
    expect(await answer({ context: { model: "from-run" } })).toEqual({ model: "from-run", temperature: 0 });
    const run = await fx.client.runs.create(t.thread_id, a.assistant_id, { input: human("m"), metadata: { mine: 1 } });
    await fx.client.runs.join(t.thread_id, run.run_id);
    const stored = await fx.client.runs.get(t.thread_id, run.run_id);
    expect((stored as unknown as { kwargs: { config: { metadata: unknown } } }).kwargs.config.metadata).toMatchObject({
      mine: 1,
      graph_id: "context",
      assistant_id: a.assistant_id,
    });
  });

  it("emits exactly the requested event names", async () => {
    const t = await fx.client.threads.create();
    const msgs = await collect(fx.client.runs.stream(t.thread_id, "agent", { input: human("hello there"), streamMode: "messages" }));
    expect(new Set(msgs.map((e) => e.event))).toEqual(new Set(["metadata", "messages/metadata", "messages/partial", "messages/complete"]));
    expect(msgs.at(-1)!.event).toBe("messages/complete");
    const custom = await collect(fx.client.runs.stream(null, "custom_stream", { input: {}, streamMode: "custom" }));
    expect(custom.filter((e) => e.event === "custom").map((e) => e.data)).toEqual([1, 2, 3].map((n) => ({ progress: n, of: 3 })));
    const cps = await collect(fx.client.runs.stream(t.thread_id, "echo", { input: human("c"), streamMode: "checkpoints" }));
    const cp = cps.filter((e) => e.event === "checkpoints");
    expect(cp.length).toBeGreaterThan(0);
    expect(Object.keys(cp[0].data as object).sort()).toEqual(["metadata", "next", "values"]);
    const events = await collect(fx.client.runs.stream(null, "echo", { input: human("e"), streamMode: "events" }));
    expect(events.some((e) => e.event === "events" && (e.data as { event: string }).event === "on_chain_start")).toBe(true);
    const debug = await collect(fx.client.runs.stream(t.thread_id, "echo", { input: human("d"), streamMode: ["debug", "tasks"] }));
    expect(new Set(debug.map((e) => e.event))).toEqual(new Set(["metadata", "debug", "tasks"]));
  });

  it("marks the thread interrupted when a subgraph interrupts, and shows subgraph state", async () => {
    const t = await fx.client.threads.create();
    const out = (await fx.client.runs.wait(t.thread_id, "subgraph", {
      input: human("x"),
      config: { configurable: { interrupt_in_subgraph: true } },
    })) as Record<string, unknown>;
    expect(out.__interrupt__).toBeDefined();
    expect((await fx.client.threads.get(t.thread_id)).status).toBe("interrupted");
    const s = await fx.client.threads.getState(t.thread_id, undefined, { subgraphs: true });
    expect(s.tasks.some((task) => task.state !== null && task.state !== undefined)).toBe(true);
  });

  it("shapes debug and tasks payloads as upstream: checkpoint objects, parent_config, no internal keys, a subgraph task's checkpoint", async () => {
    const t = await fx.client.threads.create();
    const events = await collect(fx.client.runs.stream(t.thread_id, "subgraph", { input: human("x"), streamMode: ["debug", "tasks"] }));
    type Debug = { type: string; payload: Record<string, any> };
    const checkpoints = events.filter((e) => e.event === "debug" && (e.data as Debug).type === "checkpoint").map((e) => (e.data as Debug).payload);
    expect(checkpoints.length).toBeGreaterThan(1);
    for (const [i, p] of checkpoints.entries()) {
      // the first checkpoint has no parent: parent_config is undefined, so absent from the JSON (as upstream)
      const keys = ["checkpoint", "config", "metadata", "next", "parent_checkpoint", ...(i === 0 ? [] : ["parent_config"]), "tasks", "values"];
      expect(Object.keys(p).sort()).toEqual(keys);
      expect(p.checkpoint).toMatchObject({ thread_id: t.thread_id, checkpoint_ns: "", checkpoint_id: p.config.configurable.checkpoint_id });
      expect(Object.keys(p.config.configurable).filter((k) => k.startsWith("__"))).toEqual([]);
    }
    expect(checkpoints.at(-1)!.parent_checkpoint).toMatchObject({ thread_id: t.thread_id, checkpoint_id: expect.any(String) });
    // the step that runs the subgraph names its checkpoint, not its raw config
    const subgraphTasks = checkpoints.flatMap((p) => p.tasks as Record<string, unknown>[]).filter((task) => task.name === "child");
    expect(subgraphTasks.length).toBeGreaterThan(0);
    for (const task of subgraphTasks) {
      expect(task).not.toHaveProperty("state");
      expect(task.checkpoint).toMatchObject({ thread_id: t.thread_id, checkpoint_ns: expect.stringMatching(/^child:/) });
    }
    // events mode leaves out LangGraph's hidden plumbing, as upstream
    const all = await collect(fx.client.runs.stream(null, "subgraph", { input: human("e"), streamMode: "events" }));
    const tags = all.filter((e) => e.event === "events").map((e) => (e.data as { tags?: string[] }).tags ?? []);
    expect(tags.length).toBeGreaterThan(0);
    expect(tags.filter((t) => t.includes("langsmith:hidden"))).toEqual([]);
  });

  it("names subgraph events with their namespace", async () => {
    const events = await collect(fx.client.runs.stream(null, "subgraph", { input: human("x"), streamMode: ["updates"], streamSubgraphs: true }));
    expect(events.some((e) => /^updates\|child:[0-9a-f-]+$/.test(e.event))).toBe(true);
    expect(events.some((e) => e.event === "updates")).toBe(true);
  });
});

describe("interrupts, history, state", () => {
  it("stops at interrupt_before, continues with a null input, and keeps history", async () => {
    const t = await fx.client.threads.create();
    await fx.client.runs.wait(t.thread_id, "interrupt_steps", { input: { messages: ["start"] }, interruptBefore: ["two"] });
    expect((await fx.client.threads.get(t.thread_id)).status).toBe("interrupted");
    const s = await fx.client.threads.getState(t.thread_id);
    expect(s.next).toEqual(["two"]);
    const done = (await fx.client.runs.wait(t.thread_id, "interrupt_steps", { input: null })) as { messages: string[] };
    expect(done.messages).toEqual(["start", "one", "two", "three"]);
    const history = await fx.client.threads.getHistory(t.thread_id, { limit: 20 });
    expect(history[0].next).toEqual([]);
    expect(history.at(-1)!.metadata?.step).toBe(-1);
    const older = await fx.client.threads.getHistory(t.thread_id, { limit: 2, before: { configurable: history[1].checkpoint } as never });
    expect(older[0].checkpoint.checkpoint_id).toBe(history[2].checkpoint.checkpoint_id);
    const atCheckpoint = await fx.client.threads.getState(t.thread_id, history[2].checkpoint.checkpoint_id!);
    expect(atCheckpoint.checkpoint.checkpoint_id).toBe(history[2].checkpoint.checkpoint_id);
  });

  it("patches the latest checkpoint's metadata", async () => {
    const t = await fx.client.threads.create();
    await fx.client.runs.wait(t.thread_id, "echo", { input: human("m") });
    await fx.client.threads.patchState(t.thread_id, { reviewed: true, by: "qa" });
    const s = await fx.client.threads.getState(t.thread_id);
    expect(s.metadata).toMatchObject({ reviewed: true, by: "qa", source: "loop" });
    const fresh = await fx.client.threads.create();
    await expect(fx.client.threads.patchState(fresh.thread_id, { x: 1 })).rejects.toThrow(/HTTP 404/);
  });

  it("updates state as a node and refuses while busy", async () => {
    const t = await fx.client.threads.create();
    await fx.client.runs.wait(t.thread_id, "interrupt_steps", { input: { messages: ["s"] } });
    const r = await fx.client.threads.updateState(t.thread_id, { values: { messages: ["patched"] }, asNode: "three" });
    expect((r as unknown as { checkpoint: { checkpoint_id: string } }).checkpoint.checkpoint_id).toBeTruthy();
    expect(r.configurable?.checkpoint_id).toBeTruthy();
    const s = await fx.client.threads.getState(t.thread_id);
    expect((s.values as { messages: string[] }).messages.at(-1)).toBe("patched");
    await fx.client.runs.create(t.thread_id, "slow", { input: { messages: [] }, config: { configurable: { sleep_ms: 600 } } });
    await expect(fx.client.threads.updateState(t.thread_id, { values: { messages: ["x"] } })).rejects.toThrow(/HTTP 409/);
  });

  it("rolls back a running run: the run and its checkpoints are gone", async () => {
    const t = await fx.client.threads.create();
    await fx.client.runs.wait(t.thread_id, "slow", { input: human("keep"), config: { configurable: { sleep_ms: 10 } } });
    const before = await fx.client.threads.getHistory(t.thread_id, { limit: 100 });
    const run = await fx.client.runs.create(t.thread_id, "slow", { input: human("drop"), config: { configurable: { sleep_ms: 3000 } } });
    await waitUntil(async () => (await fx.client.runs.get(t.thread_id, run.run_id)).status === "running", { what: "the run to start" });
    await fx.client.runs.cancel(t.thread_id, run.run_id, true, "rollback");
    await expect(fx.client.runs.get(t.thread_id, run.run_id)).rejects.toThrow(/HTTP 404/);
    const after = await fx.client.threads.getHistory(t.thread_id, { limit: 100 });
    expect(after.length).toBe(before.length);
    expect((await fx.client.threads.get(t.thread_id)).status).toBe("idle");
  });
});

describe("store", () => {
  it("shares the store between graphs and the /store routes", async () => {
    const t = await fx.client.threads.create();
    await fx.client.runs.wait(t.thread_id, "store_graph", { input: {} });
    await fx.client.runs.wait(t.thread_id, "store_graph", { input: {} });
    const item = await fx.client.store.getItem(["counters"], t.thread_id);
    expect(item?.value).toEqual({ count: 2 });
    await fx.client.store.putItem(["notes", "a"], "k", { v: 1 });
    const found = await fx.client.store.searchItems(["notes"]);
    expect(found.items.map((i) => i.key)).toEqual(["k"]);
  });
});

describe("RemoteGraph", () => {
  it("invokes, streams and reads state through RemoteGraph", async () => {
    const remote = new RemoteGraph({ graphId: "echo", url: fx.server.url, apiKey: null as unknown as string });
    const t = await fx.client.threads.create();
    const config = { configurable: { thread_id: t.thread_id } };
    const out = (await remote.invoke(human("remote"), config)) as { messages: { content: string }[] };
    expect(out.messages.map((m) => m.content)).toContain("remote");
    const chunks: unknown[] = [];
    for await (const c of await remote.stream(human("again"), { ...config, streamMode: "updates" })) chunks.push(c);
    expect(chunks.length).toBeGreaterThan(0);
    const state = await remote.getState(config);
    expect((state.values as { messages: unknown[] }).messages.length).toBe(4);
    const g = await remote.getGraphAsync();
    expect(Object.keys(g.nodes)).toContain("__start__");
  });

  it("stops at interrupt() with GraphInterrupt and resumes with a Command (human in the loop)", async () => {
    const remote = new RemoteGraph({ graphId: "agent", url: fx.server.url, apiKey: null as unknown as string });
    const t = await fx.client.threads.create();
    const config = { configurable: { thread_id: t.thread_id, require_approval: true } };
    // RemoteGraph raises GraphInterrupt when an `updates` event carries __interrupt__ (reference §14)
    const stopped = await remote.invoke(human("what is the weather in Paris"), config).then(
      () => null,
      (err: unknown) => err as { name: string; interrupts?: { value: { tool_calls: { name: string; args: unknown }[] } }[] },
    );
    expect(stopped?.name).toBe("GraphInterrupt");
    expect(stopped?.interrupts?.[0].value.tool_calls).toEqual([expect.objectContaining({ name: "get_weather", args: { city: "Paris" } })]);
    const paused = await remote.getState(config);
    expect(paused.next).toEqual(["human_review"]);
    expect((await fx.client.threads.get(t.thread_id)).status).toBe("interrupted");

    const done = (await remote.invoke(new Command({ resume: "approve" }), config)) as { messages: { content: string }[] };
    expect(done.messages.at(-1)?.content).toBe("According to get_weather: It is sunny and 21°C in Paris.");
    expect((await fx.client.threads.get(t.thread_id)).status).toBe("idle");
  });
});

describe("user project with its own node_modules", () => {
  it("serves a graph that imports its own copy of LangGraph", async () => {
    const dir = mkdtempSync(join(tmpdir(), "troupe-userproj-"));
    const config = await makeUserProject(dir);
    const s = await startTestServer({ config, workers: 1 });
    try {
      const c = new Client({ apiUrl: s.url, apiKey: null });
      const t = await c.threads.create();
      const out = (await c.runs.wait(t.thread_id, "user_graph", { input: human("mine") })) as { messages: { content: string }[] };
      expect(out.messages.at(-1)!.content).toBe("user project: mine");
      const again = (await c.runs.wait(t.thread_id, "user_graph", { input: human("twice") })) as { messages: { type: string }[] };
      expect(again.messages.map((m) => m.type)).toEqual(["human", "ai", "human", "ai"]);
    } finally {
      await s.stop();
      s.cleanup();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
