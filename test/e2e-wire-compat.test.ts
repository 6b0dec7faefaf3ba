// Wire details clients compare exactly with the open-source JS server (issue 24.5), through the
// real SDK against a spawned server: a subgraph interrupt's state tasks, the text of an unknown
// assistant in a run, the thread after a cancelled run, join-stream of an unknown run.
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { human, rawRequest, useServer } from "./helpers/suite.ts";
import { waitUntil } from "./helpers/wait.ts";

const fx = useServer();

const TASK_FIELDS = ["checkpoint", "error", "id", "interrupts", "name", "path", "result", "state"];
const NESTED_STATE_FIELDS = ["checkpoint", "created_at", "metadata", "next", "parent_checkpoint", "tasks", "values"];
const keys = (o: unknown) => Object.keys(o as object).sort();

describe("state.tasks of a subgraph interrupt", () => {
  it("carry exactly upstream's fields, in the task and in the subgraph's nested state", async () => {
    const t = await fx.client.threads.create();
    await fx.client.runs.wait(t.thread_id, "subgraph", { input: human("x"), config: { configurable: { interrupt_in_subgraph: true } } });

    const flat = await fx.client.threads.getState(t.thread_id);
    expect(flat.tasks).toHaveLength(1);
    expect(keys(flat.tasks[0])).toEqual(TASK_FIELDS);
    expect(flat.tasks[0]).toMatchObject({ name: "child", path: ["__pregel_pull", "child"], error: null, state: null, result: null });
    expect(keys(flat.tasks[0].checkpoint)).toEqual(["checkpoint_ns", "thread_id"]);

    const nested = await fx.client.threads.getState(t.thread_id, undefined, { subgraphs: true });
    const task = nested.tasks[0];
    expect(keys(task)).toEqual(TASK_FIELDS);
    expect(task.checkpoint).toBeNull();
    expect(keys(task.state)).toEqual(NESTED_STATE_FIELDS);
    const inner = task.state as unknown as { next: string[]; tasks: Record<string, unknown>[] };
    expect(inner.next).toEqual(["child_two"]);
    expect(inner.tasks.map(keys)).toEqual([TASK_FIELDS]);
    expect(inner.tasks[0]).toMatchObject({
      name: "child_two",
      interrupts: [{ id: expect.any(String), value: "child_two needs input" }],
      checkpoint: null,
      state: null,
    });
  });
});

describe("a run naming an unknown assistant or graph", () => {
  it("answers 404 with upstream's text in detail, for wait, stream and background runs", async () => {
    const t = await fx.client.threads.create();
    await expect(fx.client.runs.wait(t.thread_id, "non-existent", { input: human("x") })).rejects.toThrow(/No assistant found for/);
    const stream = async () => {
      for await (const _ of fx.client.runs.stream(t.thread_id, "non-existent", { input: human("x") })) void _;
    };
    await expect(stream()).rejects.toThrow(/No assistant found for/);
    const missing = randomUUID();
    const r = await rawRequest(fx.server.url, `/threads/${t.thread_id}/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ assistant_id: missing }),
    });
    expect(r).toMatchObject({
      status: 404,
      body: { detail: `No assistant found for "${missing}". Make sure the assistant ID is for a valid assistant or a valid graph ID.` },
    });
    const stateless = await rawRequest(fx.server.url, "/runs/wait", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ assistant_id: "nope" }),
    });
    expect(stateless).toMatchObject({ status: 404, body: { detail: expect.stringMatching(/^No assistant found for "nope"/) } });
  });
});

describe("a cancelled run", () => {
  it("leaves the thread idle without values or interrupts, as upstream; the checkpointed state stays", async () => {
    const t = await fx.client.threads.create();
    await fx.client.runs.wait(t.thread_id, "echo", { input: human("before") });
    expect((await fx.client.threads.get(t.thread_id)).values).toBeDefined();

    const run = await fx.client.runs.create(t.thread_id, "slow", { input: human("cancel me"), config: { configurable: { sleep_ms: 30_000 } } });
    await waitUntil(async () => (await fx.client.runs.get(t.thread_id, run.run_id)).status === "running", { what: "the run to start" });
    await fx.client.runs.cancel(t.thread_id, run.run_id, true);

    expect((await fx.client.runs.get(t.thread_id, run.run_id)).status).toBe("interrupted");
    const thread = await fx.client.threads.get(t.thread_id);
    expect(thread.status).toBe("idle");
    expect(thread).not.toHaveProperty("values");
    expect(thread).not.toHaveProperty("interrupts");
    // the state is read from the checkpoints: the cancelled run's input is there, the next run goes on from it
    const state = await fx.client.threads.getState(t.thread_id);
    expect((state.values as { messages: { content: string }[] }).messages.map((m) => m.content)).toContain("before");
    await fx.client.runs.wait(t.thread_id, "echo", { input: human("after") });
    const after = await fx.client.threads.get(t.thread_id);
    expect((after.values as { messages: { content: string }[] }).messages.map((m) => m.content).at(-1)).toBe("after");
  });
});

describe("join-stream of an unknown run", () => {
  it("is an SSE `error` event saying `Run not found` on a thread's run, and an empty stream without a thread", async () => {
    const t = await fx.client.threads.create();
    const events: { event: string; data: unknown }[] = [];
    for await (const e of fx.client.runs.joinStream(t.thread_id, randomUUID())) events.push(e);
    expect(events).toEqual([{ event: "error", data: "Run not found" }]);

    const runId = randomUUID();
    const res = await fetch(`${fx.server.url}/runs/${runId}/stream`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    expect(res.headers.get("content-location")).toBe(`/runs/${runId}`);
    expect((await res.text()).split("\n").filter((line) => line !== "" && !line.startsWith(":"))).toEqual([]);
  });
});
