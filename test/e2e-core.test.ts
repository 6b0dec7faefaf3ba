// End to end through the real @langchain/langgraph-sdk Client against a spawned server:
// assistants, threads, runs (wait/stream/background/join), interrupts, multitask strategies.
import { hostname } from "node:os";
import { describe, expect, it } from "vitest";
import { human, rawRequest, useServer } from "./helpers/suite.ts";
import { waitUntil } from "./helpers/wait.ts";

const fx = useServer();

const raw = (path: string, init?: RequestInit) => rawRequest(fx.server.url, path, init);

describe("system", () => {
  it("answers /ok, /info, /docs and /openapi.json", async () => {
    expect((await raw("/ok")).body).toEqual({ ok: true });
    const info = (await raw("/info")).body as { version: string; flags: Record<string, boolean>; node_id: string; nodes_alive: number };
    expect(info.version).toMatch(/^\d+\.\d+\.\d+/);
    // which node answered (no --node-id: TROUPE_NODE_NAME, else the host name; a Postgres-backed
    // server is a cluster node, whose default id adds a random suffix: docs/CLUSTER.md) of how many alive
    expect(info.nodes_alive).toBe(1);
    if (process.env.TROUPE_NODE_NAME) expect(info.node_id).toBe(process.env.TROUPE_NODE_NAME);
    else if (process.env.TROUPE_TEST_BACKEND === "postgres")
      expect(info.node_id).toMatch(
        new RegExp(
          `^${hostname()
            .replace(/[^A-Za-z0-9._-]/g, "-")
            .slice(0, 30)
            .replace(/\./g, "\\.")}-[0-9a-f]{6}$`,
        ),
      );
    else expect(info.node_id).toBe(hostname());
    const doc = (await raw("/openapi.json")).body as { openapi: string; paths: Record<string, unknown> };
    expect(doc.openapi).toBe("3.1.0");
    expect(doc.paths["/threads/{thread_id}/runs/wait"]).toBeDefined();
    // each operation lists the error statuses it can answer
    const codes = (path: string, method: string) => Object.keys((doc.paths[path] as Record<string, { responses: object }>)[method].responses).sort();
    expect(codes("/threads/{thread_id}/runs/wait", "post")).toEqual(["200", "400", "404", "413", "415", "422", "429"]);
    expect(codes("/ok", "get")).toEqual(["200", "429"]);
    const html = await raw("/docs");
    expect(html.status).toBe(200);
    expect(String(html.body)).toContain("/threads/{thread_id}/runs/stream");
  });
});

describe("assistants", () => {
  it("has a default assistant per graph with the deterministic id", async () => {
    const a = await fx.client.assistants.get("agent");
    expect(a.assistant_id).toBe("fe096781-5601-53d2-b2f6-0d3403f7e9ca");
    expect(a.graph_id).toBe("agent");
    expect(a.metadata).toEqual({ created_by: "system" });
    const echo = await fx.client.assistants.get("046b5dc7-2108-582c-9c6c-31d556d138f0");
    expect(echo.name).toBe("echo");
  });

  it("creates, patches into versions, searches, counts and deletes", async () => {
    const a = await fx.client.assistants.create({ graphId: "echo", config: { configurable: { x: 1 } }, metadata: { team: "t1" }, name: "mine" });
    expect(a.version).toBe(1);
    await expect(fx.client.assistants.create({ graphId: "echo", assistantId: a.assistant_id })).rejects.toThrow(/HTTP 409/);
    const same = await fx.client.assistants.create({ graphId: "echo", assistantId: a.assistant_id, ifExists: "do_nothing" });
    expect(same.assistant_id).toBe(a.assistant_id);
    const p = await fx.client.assistants.update(a.assistant_id, { metadata: { extra: true }, name: "renamed" });
    expect(p.version).toBe(2);
    expect(p.metadata).toEqual({ team: "t1", extra: true });
    const versions = await fx.client.assistants.getVersions(a.assistant_id);
    expect(versions.map((v) => v.version)).toEqual([2, 1]);
    const back = await fx.client.assistants.setLatest(a.assistant_id, 1);
    expect(back.name).toBe("mine");
    const found = await fx.client.assistants.search({ metadata: { team: "t1" } });
    expect(found.map((x) => x.assistant_id)).toEqual([a.assistant_id]);
    expect(await fx.client.assistants.count({ graphId: "echo" })).toBeGreaterThanOrEqual(2);
    await fx.client.assistants.delete(a.assistant_id);
    await expect(fx.client.assistants.get(a.assistant_id)).rejects.toThrow(/HTTP 404/);
  });

  it("deletes an assistant's runs with it, cancelling its running and queued ones; threads keep their state", async () => {
    const a = await fx.client.assistants.create({ graphId: "slow", config: { configurable: { sleep_ms: 0 } } });
    const other = await fx.client.assistants.create({ graphId: "echo" });
    const t = await fx.client.threads.create();
    await fx.client.runs.wait(t.thread_id, a.assistant_id, { input: human("done") });
    const kept = await fx.client.runs.create(t.thread_id, other.assistant_id, { input: human("other") });
    await fx.client.runs.join(t.thread_id, kept.run_id);
    const slow = { input: human("slow"), config: { configurable: { sleep_ms: 5_000 } } };
    const running = await fx.client.runs.create(t.thread_id, a.assistant_id, slow);
    const queued = await fx.client.runs.create(t.thread_id, a.assistant_id, slow);
    await fx.client.assistants.delete(a.assistant_id);
    expect((await fx.client.runs.list(t.thread_id)).map((r) => r.run_id)).toEqual([kept.run_id]);
    await expect(fx.client.runs.get(t.thread_id, running.run_id)).rejects.toThrow(/HTTP 404/);
    await expect(fx.client.runs.get(t.thread_id, queued.run_id)).rejects.toThrow(/HTTP 404/);
    const thread = await fx.client.threads.get(t.thread_id);
    expect(thread.status).not.toBe("busy");
    const contents = ((await fx.client.threads.getState(t.thread_id)).values as { messages: { content: string }[] }).messages.map((m) => m.content);
    expect(contents.slice(0, 4)).toEqual(["done", "done", "other", "other"]);
  });

  it("refuses unknown graphs and validates bodies with 422", async () => {
    const r = await raw("/assistants", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ graph_id: "nope" }) });
    expect(r.status).toBe(404);
    expect((r.body as { detail: string }).detail).toContain("nope");
    const v = await raw("/assistants", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ config: 5 }) });
    expect(v.status).toBe(422);
    const detail = (v.body as { detail: { loc: unknown[]; msg: string; type: string }[] }).detail;
    expect(detail).toContainEqual({ loc: ["body", "graph_id"], msg: "Field required", type: "missing" });
    expect(detail.some((d) => d.loc.join(".") === "body.config")).toBe(true);
  });

  // the first /schemas of an Annotation graph runs the TypeScript checker over it (tens of seconds here)
  it("describes the graph", { timeout: 180_000 }, async () => {
    const g = (await fx.client.assistants.getGraph("agent")) as { nodes: { id: string }[]; edges: unknown[] };
    expect(g.nodes.map((n) => n.id)).toContain("__start__");
    const s = await fx.client.assistants.getSchemas("agent");
    expect(s.graph_id).toBe("agent");
  });
});

describe("threads", () => {
  it("creates, gets, patches, searches, counts, copies and deletes", async () => {
    const t = await fx.client.threads.create({ metadata: { owner: "ann" } });
    expect(t.status).toBe("idle");
    expect((await fx.client.threads.get(t.thread_id)).metadata).toEqual({ owner: "ann" });
    const p = await fx.client.threads.update(t.thread_id, { metadata: { k: 2 } });
    expect(p.metadata).toEqual({ owner: "ann", k: 2 });
    const found = await fx.client.threads.search({ metadata: { owner: "ann" } });
    expect(found.map((x) => x.thread_id)).toContain(t.thread_id);
    expect(await fx.client.threads.count({ metadata: { owner: "ann", k: 2 } })).toBe(1);
    await fx.client.runs.wait(t.thread_id, "echo", { input: human("hello") });
    const copy = await fx.client.threads.copy(t.thread_id);
    expect(copy.thread_id).not.toBe(t.thread_id);
    const copiedState = await fx.client.threads.getState(copy.thread_id);
    const msgs = (copiedState.values as { messages: { content: string }[] }).messages;
    expect(msgs.map((m) => m.content)).toEqual(["hello", "hello"].map((x, i) => (i === 0 ? x : msgs[1].content)));
    const original = await fx.client.threads.get(t.thread_id);
    expect((original.values as { messages: unknown[] }).messages).toHaveLength(2);
    expect((await fx.client.threads.get(copy.thread_id)).values).toEqual(original.values);
    expect(
      (await fx.client.threads.search({ values: { messages: (original.values as { messages: unknown[] }).messages } })).map((x) => x.thread_id).sort(),
    ).toEqual([t.thread_id, copy.thread_id].sort());
    const [selected] = await fx.client.threads.search({ ids: [t.thread_id], select: ["thread_id", "status"] } as Parameters<
      typeof fx.client.threads.search
    >[0]);
    expect(selected).toEqual({ thread_id: t.thread_id, status: "idle" });
    await fx.client.threads.delete(t.thread_id);
    await expect(fx.client.threads.get(t.thread_id)).rejects.toThrow(/HTTP 404/);
  });

  it("keeps a long thread's values exact across wait, join, get, state and a background queue (segmented JSON, chunked storage)", async () => {
    const t = await fx.client.threads.create();
    type Messages = { messages: { content: string; type: string }[] };
    let last: Messages | undefined;
    // 70 runs = 140 messages: several 64-message segments and storage chunks
    for (let i = 0; i < 70; i++) last = (await fx.client.runs.wait(t.thread_id, "echo", { input: human(`m${i} é ✓ \u2028`) })) as Messages;
    expect(last!.messages).toHaveLength(140);
    expect(last!.messages[138].content).toBe("m69 é ✓ \u2028");
    const state = await fx.client.threads.getState(t.thread_id);
    expect(state.values).toEqual(last);
    expect((await fx.client.threads.get(t.thread_id)).values).toEqual(last);
    // background runs queued on the thread; the joined output is the final state
    const queued = [];
    for (let i = 0; i < 5; i++) queued.push(await fx.client.runs.create(t.thread_id, "echo", { input: human(`q${i}`) }));
    const joined = (await fx.client.runs.join(t.thread_id, queued[4].run_id)) as Messages;
    expect(joined.messages).toHaveLength(150);
    expect(joined.messages.at(-2)?.content).toBe("q4");
    expect((await fx.client.threads.get(t.thread_id)).values).toEqual(joined);
    expect((await fx.client.threads.getState(t.thread_id)).values).toEqual(joined);
  });

  it("answers a join with that run's own output, also a large one its worker kept after later runs changed the thread", async () => {
    const t = await fx.client.threads.create();
    type Messages = { messages: { content: string }[] };
    const big = "é✓".repeat(40_000); // each run's output > 64 KB: not posted with run.done, kept in the worker
    const runs = [];
    for (let i = 0; i < 3; i++) runs.push(await fx.client.runs.create(t.thread_id, "echo", { input: human(`${big}${i}`) }));
    const third = (await fx.client.runs.join(t.thread_id, runs[2].run_id)) as Messages;
    expect(third.messages).toHaveLength(6);
    // earlier runs: their own final values, not the thread's current ones
    const first = (await fx.client.runs.join(t.thread_id, runs[0].run_id)) as Messages;
    // (compared by suffix: a failure should not print 80 KB strings)
    expect(first.messages.map((m) => [m.content.length, m.content.slice(-3)])).toEqual([
      [big.length + 1, "é✓0"],
      [big.length + 1, "é✓0"],
    ]);
    const second = (await fx.client.runs.join(t.thread_id, runs[1].run_id)) as Messages;
    expect(second.messages).toHaveLength(4);
    expect(second.messages[3].content === `${big}1`).toBe(true);
    // awaited outputs come with the run's end
    const waited = (await fx.client.runs.wait(t.thread_id, "echo", { input: human("w") })) as Messages;
    expect(waited.messages).toHaveLength(8);
    expect(JSON.stringify(await fx.client.runs.join(t.thread_id, runs[0].run_id)) === JSON.stringify(first)).toBe(true);
  });

  it("leaves no run behind when a thread is deleted while its runs run or wait: a thread re-created with that id starts empty", async () => {
    const t = await fx.client.threads.create();
    const slow = { config: { configurable: { sleep_ms: 2_000 } } };
    const running = await fx.client.runs.create(t.thread_id, "slow", { input: human("one"), ...slow });
    await fx.client.runs.create(t.thread_id, "slow", { input: human("two"), ...slow });
    await waitUntil(async () => (await fx.client.runs.get(t.thread_id, running.run_id)).status === "running", { what: "the run to start" });
    await fx.client.threads.delete(t.thread_id);
    await new Promise((r) => setTimeout(r, 300)); // the aborted run finishes after the delete
    const again = await fx.client.threads.create({ threadId: t.thread_id });
    expect(again.status).toBe("idle");
    expect(await fx.client.runs.list(t.thread_id)).toEqual([]);
    await expect(fx.client.runs.get(t.thread_id, running.run_id)).rejects.toThrow(/HTTP 404/);
    expect((await fx.client.threads.getState(t.thread_id)).values).toEqual({});
    expect(await fx.client.threads.getHistory(t.thread_id)).toEqual([]);
  });

  it("prunes threads: keep_latest keeps the thread and its latest state only, delete removes it", async () => {
    const kept = await fx.client.threads.create();
    await fx.client.runs.wait(kept.thread_id, "echo", { input: human("one") });
    await fx.client.runs.wait(kept.thread_id, "echo", { input: human("two") });
    const before = await fx.client.threads.getState(kept.thread_id);
    expect((await fx.client.threads.getHistory(kept.thread_id, { limit: 100 })).length).toBeGreaterThan(2);
    const gone = await fx.client.threads.create();
    expect(await fx.client.threads.prune([kept.thread_id], { strategy: "keep_latest" })).toEqual({ pruned_count: 1 });
    const history = await fx.client.threads.getHistory(kept.thread_id, { limit: 100 });
    expect(history).toHaveLength(1);
    expect(history[0].values).toEqual(before.values);
    expect((await fx.client.threads.getState(kept.thread_id)).checkpoint.checkpoint_id).toBe(before.checkpoint.checkpoint_id);
    // the thread keeps working on top of its latest state
    const after = (await fx.client.runs.wait(kept.thread_id, "echo", { input: human("three") })) as { messages: { content: string }[] };
    expect(after.messages.filter((_, i) => i % 2 === 0).map((m) => m.content)).toEqual(["one", "two", "three"]);
    expect(after.messages).toHaveLength(6);
    expect(await fx.client.threads.prune([gone.thread_id, "00000000-0000-4000-8000-000000000000"])).toEqual({ pruned_count: 1 });
    await expect(fx.client.threads.get(gone.thread_id)).rejects.toThrow(/HTTP 404/);
    const bad = await raw("/threads/prune", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ thread_ids: [], strategy: "keep_some" }),
    });
    expect(bad.status).toBe(422);
  });

  it("answers JSON errors: 404 detail, 422 bad uuid, 400 malformed json, 415 content type, 413 size", async () => {
    const missing = await raw("/threads/00000000-0000-4000-8000-000000000000");
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ detail: "Thread with ID 00000000-0000-4000-8000-000000000000 not found" });
    const bad = await raw("/threads/not-a-uuid");
    expect(bad.status).toBe(422);
    expect((bad.body as { detail: { loc: unknown[] }[] }).detail[0].loc).toEqual(["path", "thread_id"]);
    const malformed = await raw("/threads", { method: "POST", headers: { "content-type": "application/json" }, body: "{nope" });
    expect(malformed.status).toBe(400);
    expect(malformed.body).toEqual({ detail: "Malformed JSON in request body" });
    const form = await raw("/threads", { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "a=b" });
    expect(form.status).toBe(415);
    const huge = await raw("/threads", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ metadata: { x: "y".repeat(11 * 1024 * 1024) } }),
    });
    expect(huge.status).toBe(413);
    expect((await raw("/ok")).status).toBe(200);
  });

  it("answers bad state updates with 4xx, and reads the state of a thread whose last run failed on its input", async () => {
    const t = await fx.client.threads.create();
    await fx.client.runs.wait(t.thread_id, "echo", { input: human("fine") });
    const post = (path: string, body: unknown) => raw(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    const unknownNode = await post(`/threads/${t.thread_id}/state`, { values: { messages: [] }, as_node: "nope" });
    expect(unknownNode).toMatchObject({ status: 400, body: { detail: expect.stringContaining("nope") } });
    expect((await post(`/threads/${t.thread_id}/state`, { values: 5 })).status).toBe(422);
    const badSuperstep = await post("/threads", { metadata: { graph_id: "echo" }, supersteps: [{ updates: [{ values: { messages: [] }, as_node: "zzz" }] }] });
    expect(badSuperstep.status).toBe(400);

    // a message LangChain cannot coerce fails the run; the state reads as checkpointed before it
    const failed = await fx.client.runs.wait(t.thread_id, "echo", { input: { messages: [{ role: "bogus_role", content: "x" }] }, raiseError: false });
    expect(failed).toMatchObject({ __error__: { message: expect.stringContaining("Unable to coerce message") } });
    const state = await raw(`/threads/${t.thread_id}/state`);
    expect(state.status).toBe(200);
    expect((state.body as { values: { messages: { content: string }[] } }).values.messages.map((m) => m.content)).toEqual(["fine", "fine"]);
    expect((await fx.client.threads.get(t.thread_id)).status).toBe("error");
    // and the next run goes on from there
    await fx.client.runs.wait(t.thread_id, "echo", { input: human("again") });
    const after = await fx.client.threads.getState(t.thread_id);
    expect((after.values as { messages: { content: string }[] }).messages.map((m) => m.content)).toEqual(["fine", "fine", "again", "again"]);
  });

  it("takes UUIDs in upper case or without dashes as the same id (stored lower case, dashed)", async () => {
    const id = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
    const post = (path: string, body: unknown) => raw(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    expect((await post("/threads", { thread_id: id.toUpperCase() })).body).toMatchObject({ thread_id: id });
    expect((await raw(`/threads/${id.toUpperCase()}`)).body).toMatchObject({ thread_id: id });
    expect((await raw(`/threads/${id.replace(/-/g, "")}`)).body).toMatchObject({ thread_id: id });
    expect(((await post("/threads/search", { ids: [id.toUpperCase()] })).body as { thread_id: string }[]).map((t) => t.thread_id)).toEqual([id]);
    const run = (await post(`/threads/${id.toUpperCase()}/runs/wait`, { assistant_id: "echo", input: human("upper") })).body as { messages: unknown[] };
    expect(run.messages).toHaveLength(2);
    const a = await fx.client.assistants.create({ graphId: "echo" });
    expect((await raw(`/assistants/${a.assistant_id.toUpperCase()}`)).body).toMatchObject({ assistant_id: a.assistant_id });
  });

  it("pre-populates a thread with supersteps and reports history", async () => {
    const t = await fx.client.threads.create({
      graphId: "echo",
      supersteps: [
        { updates: [{ values: { messages: [{ role: "human", content: "seeded" }] }, asNode: "__input__" }] },
        { updates: [{ values: { messages: [{ role: "ai", content: "answer" }] }, asNode: "echo" }] },
      ],
    });
    // LangGraph applies an __input__ update when the next superstep runs; the "echo" update lands on top
    expect(JSON.stringify(t.values)).toContain("answer");
    const history = await fx.client.threads.getHistory(t.thread_id, { limit: 10 });
    expect(history.length).toBeGreaterThanOrEqual(2);
    expect(history[0].checkpoint.checkpoint_id).toBeTruthy();
  });

  it("returns only the selected fields of states, history and runs (select)", async () => {
    const t = await fx.client.threads.create();
    await fx.client.runs.wait(t.thread_id, "echo", { input: human("one") });
    await fx.client.runs.wait(t.thread_id, "echo", { input: human("two") });
    const full = await fx.client.threads.getState(t.thread_id);
    const messages = (full.values as { messages: unknown[] }).messages;
    expect(messages).toHaveLength(4);

    const onlyMessages = await fx.client.threads.getState(t.thread_id, undefined, { select: ["values.messages"] });
    expect(onlyMessages).toEqual({ values: { messages } });
    const two = await fx.client.threads.getState(t.thread_id, undefined, { select: ["next", "checkpoint"] });
    expect(two).toEqual({ next: full.next, checkpoint: full.checkpoint });
    // at a checkpoint: GET /state/{id} (string) and POST /state/checkpoint (object)
    const history = await fx.client.threads.getHistory(t.thread_id, { limit: 3, select: ["metadata", "checkpoint"] });
    expect(history).toHaveLength(3);
    for (const h of history) expect(Object.keys(h).sort()).toEqual(["checkpoint", "metadata"]);
    const older = history[2].checkpoint;
    const byId = await fx.client.threads.getState(t.thread_id, older.checkpoint_id!, { select: ["values"] });
    const byConfig = await fx.client.threads.getState(t.thread_id, older, { select: ["values"] });
    expect(Object.keys(byId)).toEqual(["values"]);
    expect(byConfig).toEqual(byId);
    expect((byId.values as { messages: unknown[] }).messages.length).toBeLessThan(4);
    const getHistory = await raw(`/threads/${t.thread_id}/history?limit=2&select=created_at`);
    expect(getHistory.status).toBe(200);
    expect((getHistory.body as object[]).map((h) => Object.keys(h))).toEqual([["created_at"], ["created_at"]]);

    const runs = await fx.client.runs.list(t.thread_id, { select: ["run_id", "status"] });
    expect(runs).toHaveLength(2);
    for (const r of runs) expect(r).toEqual({ run_id: expect.any(String), status: "success" });

    const bad = await raw(`/threads/${t.thread_id}/state?select=values&select=bogus`);
    expect(bad.status).toBe(422);
    expect((bad.body as { detail: { loc: unknown[] }[] }).detail[0].loc).toEqual(["query", "select", 1]);
    const badRuns = await raw(`/threads/${t.thread_id}/runs?select=nope`);
    expect(badRuns.status).toBe(422);

    // searches: the SDK's select fields, anything else is a 422 naming the item
    const found = await fx.client.threads.search({ ids: [t.thread_id], select: ["thread_id", "status"] });
    expect(found).toEqual([{ thread_id: t.thread_id, status: "idle" }]);
    const assistants = await fx.client.assistants.search({ graphId: "echo", select: ["assistant_id", "graph_id"] });
    expect(assistants.every((a) => Object.keys(a).sort().join() === "assistant_id,graph_id")).toBe(true);
    const post = (path: string, body: unknown) => raw(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    // extract: aliases for paths into each thread (with select, only the named fields plus `extracted`)
    const extracted = await fx.client.threads.search({
      ids: [t.thread_id],
      select: ["thread_id"],
      extract: { last: "values.messages[-1].content", graph: "metadata.graph_id", first: "values.messages[0].type", none: "values.nope[3].x" },
    });
    expect(extracted).toEqual([{ thread_id: t.thread_id, extracted: { last: "two", graph: "echo", first: "human", none: null } }]);
    const badPath = await post("/threads/search", { extract: { x: "values..messages" } });
    expect(badPath.status).toBe(422);
    expect((badPath.body as { detail: { loc: unknown[] }[] }).detail[0].loc).toEqual(["body", "extract", "x"]);
    for (const path of ["/threads/search", "/assistants/search", "/runs/crons/search"]) {
      const r = await post(path, { select: ["bogus"] });
      expect(r.status, path).toBe(422);
      expect((r.body as { detail: { loc: unknown[] }[] }).detail[0].loc).toEqual(["body", "select", 0]);
    }
  });
});

describe("error messages", () => {
  it("keep the JS server's text where it has one (reference section 0)", async () => {
    const missing = "00000000-0000-4000-8000-000000000000";
    const post = (path: string, body: unknown) => raw(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    expect(await raw(`/assistants/${missing}`)).toMatchObject({ status: 404, body: { detail: "Assistant not found" } });
    expect(await raw(`/threads/${missing}`)).toMatchObject({ status: 404, body: { detail: `Thread with ID ${missing} not found` } });
    const t = await fx.client.threads.create();
    expect(await raw(`/threads/${t.thread_id}/runs/${missing}`)).toMatchObject({ status: 404, body: { detail: "Run not found" } });
    expect(await post("/threads", { thread_id: t.thread_id })).toMatchObject({ status: 409, body: { detail: "Thread already exists" } });
    const a = await fx.client.assistants.create({ graphId: "echo" });
    expect(await post("/assistants", { graph_id: "echo", assistant_id: a.assistant_id })).toMatchObject({
      status: 409,
      body: { detail: "Assistant already exists" },
    });
  });
});

describe("runs", () => {
  it("waits for a run on a thread and updates thread status and values", async () => {
    const t = await fx.client.threads.create();
    const out = (await fx.client.runs.wait(t.thread_id, "echo", { input: human("hi") })) as { messages: { type: string; content: string }[] };
    expect(out.messages.map((m) => m.type)).toEqual(["human", "ai"]);
    const after = await fx.client.threads.get(t.thread_id);
    expect(after.status).toBe("idle");
    expect((after.values as { messages: unknown[] }).messages).toHaveLength(2);
    expect(after.metadata?.graph_id).toBe("echo");
    const runs = await fx.client.runs.list(t.thread_id);
    expect(runs).toHaveLength(1);
    expect(runs[0].status).toBe("success");
  });

  it("stores each run's metadata and configurable in its checkpoints' metadata, so history filters find them", async () => {
    const t = await fx.client.threads.create({ metadata: { owner: "ann" } });
    const first = await fx.client.runs.create(t.thread_id, "echo", {
      input: human("one"),
      metadata: { mine: "yes" },
      config: { configurable: { user_setting: 3 } },
    });
    await fx.client.runs.join(t.thread_id, first.run_id);
    const second = await fx.client.runs.create(t.thread_id, "echo", { input: human("two") });
    await fx.client.runs.join(t.thread_id, second.run_id);
    const state = await fx.client.threads.getState(t.thread_id);
    expect(state.metadata).toMatchObject({
      source: "loop",
      step: expect.any(Number),
      run_id: second.run_id,
      thread_id: t.thread_id,
      graph_id: "echo",
      assistant_id: second.assistant_id,
      owner: "ann",
    });
    expect(state.metadata).not.toHaveProperty("checkpoint_ns");
    expect(state.metadata).not.toHaveProperty("mine"); // the first run's metadata stays with its checkpoints
    const firstRuns = await fx.client.threads.getHistory(t.thread_id, { metadata: { run_id: first.run_id } });
    expect(firstRuns.length).toBeGreaterThan(0);
    for (const h of firstRuns) expect(h.metadata).toMatchObject({ run_id: first.run_id, mine: "yes", user_setting: 3 });
    expect(await fx.client.threads.getHistory(t.thread_id, { metadata: { mine: "yes" } })).toHaveLength(firstRuns.length);
    expect((await fx.client.threads.getHistory(t.thread_id, { metadata: { graph_id: "echo" }, limit: 100 })).length).toBeGreaterThan(firstRuns.length);
  });

  it("deletes an older run without losing what the later runs' checkpoints still hold", async () => {
    const t = await fx.client.threads.create();
    const first = await fx.client.runs.create(t.thread_id, "echo", { input: human("one") });
    await fx.client.runs.join(t.thread_id, first.run_id);
    await fx.client.runs.wait(t.thread_id, "echo", { input: human("two") });
    await fx.client.runs.delete(t.thread_id, first.run_id);
    await expect(fx.client.runs.get(t.thread_id, first.run_id)).rejects.toThrow(/HTTP 404/);
    const history = await fx.client.threads.getHistory(t.thread_id);
    expect(history.length).toBeGreaterThan(1); // the second run's checkpoints
    const contents = (v: unknown) => ((v as { messages?: { content: string }[] }).messages ?? []).map((m) => m.content);
    // every surviving checkpoint still starts from the first run's messages (its input checkpoint names them)
    for (const state of history) expect(contents(state.values).slice(0, 2)).toEqual(["one", "one"]);
    expect(contents((await fx.client.threads.getState(t.thread_id)).values)).toEqual(["one", "one", "two", "two"]);
  });

  it("gives a join the whole stream of a background run, running or just finished (events wait in the worker)", async () => {
    const t = await fx.client.threads.create();
    const collect = async (runId: string) => {
      const events: string[] = [];
      for await (const e of fx.client.runs.joinStream(t.thread_id, runId)) events.push(e.event);
      return events;
    };
    // still running when the join arrives: buffered events first, then live ones
    const running = await fx.client.runs.create(t.thread_id, "slow", {
      input: human("bg"),
      config: { configurable: { sleep_ms: 300 } },
      streamMode: ["values", "updates"],
    });
    const live = await collect(running.run_id);
    expect(live[0]).toBe("metadata");
    expect(live.filter((e) => e === "values")).toHaveLength(2);
    expect(live).toContain("updates");
    // finished before the join: the worker still holds its events for a late first reader
    const done = await fx.client.runs.create(t.thread_id, "echo", { input: human("quick"), streamMode: ["values"] });
    await fx.client.runs.join(t.thread_id, done.run_id);
    expect(await collect(done.run_id)).toEqual(["metadata", "values", "values"]);
    // a /wait run's output does not depend on its events
    expect(((await fx.client.runs.wait(t.thread_id, "echo", { input: human("w") })) as { messages: unknown[] }).messages).toHaveLength(6);
  });

  it("streams values with metadata first and consecutive ids", async () => {
    const t = await fx.client.threads.create();
    const events: { event: string; data: unknown }[] = [];
    for await (const e of fx.client.runs.stream(t.thread_id, "echo", { input: human("stream me"), streamMode: ["values", "updates"] })) events.push(e);
    expect(events[0].event).toBe("metadata");
    expect(Object.keys(events[0].data as object).sort()).toEqual(["attempt", "run_id"]);
    expect(new Set(events.map((e) => e.event))).toEqual(new Set(["metadata", "values", "updates"]));
    expect(events.at(-1)!.event).toBe("values");
  });

  it("streams tokens in messages-tuple mode", async () => {
    const events: { event: string; data: unknown }[] = [];
    for await (const e of fx.client.runs.stream(null, "agent", { input: human("tell me a story please"), streamMode: "messages-tuple" })) events.push(e);
    const tokens = events.filter((e) => e.event === "messages");
    expect(tokens.length).toBeGreaterThan(2);
  });

  it("creates a background run, joins it, and streams a joined resumable run from Last-Event-ID", async () => {
    const t = await fx.client.threads.create();
    const run = await fx.client.runs.create(t.thread_id, "slow", { input: human("bg"), config: { configurable: { sleep_ms: 300 } }, streamResumable: true });
    expect(run.status).toBe("pending");
    const events: { event: string }[] = [];
    for await (const e of fx.client.runs.joinStream(t.thread_id, run.run_id, { lastEventId: "-1" })) events.push(e);
    expect(events[0].event).toBe("metadata");
    const joined = (await fx.client.runs.join(t.thread_id, run.run_id)) as { messages: unknown[] };
    expect(joined.messages).toHaveLength(2);
    expect((await fx.client.runs.get(t.thread_id, run.run_id)).status).toBe("success");
  });

  it("interrupts for human approval and resumes with a command", async () => {
    const t = await fx.client.threads.create();
    const first = (await fx.client.runs.wait(t.thread_id, "agent", {
      input: human("what is the weather in Paris"),
      config: { configurable: { require_approval: true } },
    })) as Record<string, unknown>;
    expect(first.__interrupt__).toBeDefined();
    const thread = await fx.client.threads.get(t.thread_id);
    expect(thread.status).toBe("interrupted");
    const state = await fx.client.threads.getState(t.thread_id);
    expect(state.next.length).toBeGreaterThan(0);
    const resumed = (await fx.client.runs.wait(t.thread_id, "agent", {
      command: { resume: "approve" },
      config: { configurable: { require_approval: true } },
    })) as { messages: { content: string }[] };
    expect(resumed.messages.at(-1)!.content).toContain("sunny");
    expect((await fx.client.threads.get(t.thread_id)).status).toBe("idle");
  });

  it("reports a failing graph as error with __error__ and thread status error", async () => {
    const t = await fx.client.threads.create();
    const r = await raw(`/threads/${t.thread_id}/runs/wait`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ assistant_id: "error", input: {} }),
    });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ __error__: { error: "CustomError", message: "Boo!" } });
    expect((await fx.client.threads.get(t.thread_id)).status).toBe("error");
  });

  it("enqueues by default, rejects with 409, interrupts and cancels", async () => {
    const t = await fx.client.threads.create();
    const slow = { config: { configurable: { sleep_ms: 400 } } };
    const r1 = await fx.client.runs.create(t.thread_id, "slow", { input: human("one"), ...slow });
    const r2 = await fx.client.runs.create(t.thread_id, "slow", { input: human("two"), ...slow });
    await expect(fx.client.runs.create(t.thread_id, "slow", { input: human("three"), multitaskStrategy: "reject" })).rejects.toThrow(/HTTP 409/);
    await fx.client.runs.join(t.thread_id, r2.run_id);
    expect((await fx.client.runs.get(t.thread_id, r1.run_id)).status).toBe("success");
    expect((await fx.client.runs.get(t.thread_id, r2.run_id)).status).toBe("success");
    const values = (await fx.client.threads.getState(t.thread_id)).values as { messages: { content: string }[] };
    expect(values.messages.filter((m) => m.content === "one" || m.content === "two").map((m) => m.content)).toEqual(["one", "one", "two", "two"]);

    const r3 = await fx.client.runs.create(t.thread_id, "slow", { input: human("three"), config: { configurable: { sleep_ms: 5000 } } });
    await waitUntil(async () => (await fx.client.runs.get(t.thread_id, r3.run_id)).status === "running", { what: "run three to start" });
    const r4 = await fx.client.runs.create(t.thread_id, "slow", { input: human("four"), multitaskStrategy: "interrupt", ...slow });
    await fx.client.runs.join(t.thread_id, r4.run_id);
    expect((await fx.client.runs.get(t.thread_id, r3.run_id)).status).toBe("interrupted");
    expect((await fx.client.runs.get(t.thread_id, r4.run_id)).status).toBe("success");

    const r5 = await fx.client.runs.create(t.thread_id, "slow", { input: human("five"), config: { configurable: { sleep_ms: 5000 } } });
    await waitUntil(async () => (await fx.client.runs.get(t.thread_id, r5.run_id)).status === "running", { what: "run five to start" });
    await fx.client.runs.cancel(t.thread_id, r5.run_id, true);
    expect((await fx.client.runs.get(t.thread_id, r5.run_id)).status).toBe("interrupted");
    expect((await fx.client.threads.get(t.thread_id)).status).toBe("idle");
  });

  it("takes a burst of concurrent creates on one thread: all run in order, every run's config and metadata reach the thread; reject admits one", async () => {
    const t = await fx.client.threads.create();
    const created = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        fx.client.runs.create(t.thread_id, "echo", { input: human(`b${i}`), config: { configurable: { [`k${i}`]: i } }, metadata: { [`m${i}`]: i } }),
      ),
    );
    const byCreation = [...created].sort((a, b) => a.created_at.localeCompare(b.created_at) || a.run_id.localeCompare(b.run_id));
    await fx.client.runs.join(t.thread_id, byCreation.at(-1)!.run_id);
    const runs = await fx.client.runs.list(t.thread_id, { limit: 100 });
    expect(runs.map((r) => r.status)).toEqual(runs.map(() => "success"));
    // pages (with and without a status filter) concatenate to the whole list, in its order
    const pages = async (status?: "success") => {
      const out: string[] = [];
      for (let offset = 0; offset < 30; offset += 7) out.push(...(await fx.client.runs.list(t.thread_id, { limit: 7, offset, status })).map((r) => r.run_id));
      return out;
    };
    expect(await pages()).toEqual(runs.map((r) => r.run_id));
    expect(await pages("success")).toEqual(runs.map((r) => r.run_id));
    expect(await fx.client.runs.list(t.thread_id, { limit: 5, offset: 24 })).toEqual([]);
    const values = (await fx.client.threads.getState(t.thread_id)).values as { messages: { content: string; type: string }[] };
    const inputs = values.messages.filter((m) => m.type === "human").map((m) => m.content);
    expect(inputs).toHaveLength(24);
    // executed in creation order (the order the actor accepted them)
    expect(inputs).toEqual(
      byCreation.map((r) => (r as unknown as { kwargs: { input: { messages: { content: string }[] } } }).kwargs.input.messages[0].content),
    );
    const thread = await fx.client.threads.get(t.thread_id);
    expect(thread.status).toBe("idle");
    for (let i = 0; i < 24; i++) expect((thread.config as { configurable: Record<string, unknown> }).configurable[`k${i}`]).toBe(i);
    created.forEach((r, i) => expect(r.metadata).toMatchObject({ [`m${i}`]: i }));

    const idle = await fx.client.threads.create();
    const attempts = await Promise.allSettled(
      Array.from({ length: 6 }, (_, i) =>
        fx.client.runs.create(idle.thread_id, "slow", { input: human(`r${i}`), multitaskStrategy: "reject", config: { configurable: { sleep_ms: 300 } } }),
      ),
    );
    expect(attempts.filter((a) => a.status === "fulfilled")).toHaveLength(1);
    for (const a of attempts) if (a.status === "rejected") expect(String(a.reason)).toMatch(/HTTP 409/);
  });

  it("runs stateless wait and stream, and 404s runs on missing threads", async () => {
    const out = (await fx.client.runs.wait(null, "echo", { input: human("stateless") })) as { messages: unknown[] };
    expect(out.messages).toHaveLength(2);
    const events: string[] = [];
    for await (const e of fx.client.runs.stream(null, "echo", { input: human("s") })) events.push(e.event);
    expect(events).toEqual(["metadata", "values", "values"]);
    const r = await raw("/threads/00000000-0000-4000-8000-000000000001/runs", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ assistant_id: "echo" }),
    });
    expect(r.status).toBe(404);
    const created = await fx.client.runs.wait("00000000-0000-4000-8000-000000000002", "echo", { input: human("x"), ifNotExists: "create" });
    expect((created as { messages: unknown[] }).messages).toHaveLength(2);
  });
});
