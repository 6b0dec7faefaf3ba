// Requests that used to wedge the server or answer 500 (issue 17), against a spawned server: a
// 422 for a huge invalid body comes at once, keys longer than LMDB takes are refused up front,
// state updates that are the caller's fault are 4xx.
import { describe, expect, it } from "vitest";
import { human, rawRequest, useServer } from "./helpers/suite.ts";

const fx = useServer();

const raw = (path: string, init?: RequestInit) => rawRequest(fx.server.url, path, init);
const send = (method: string, path: string, body: unknown) =>
  raw(path, { method, headers: { "content-type": "application/json" }, body: typeof body === "string" ? body : JSON.stringify(body) });

describe("422s for huge invalid bodies", () => {
  it("come at once and leave /ok answering", { timeout: 60_000 }, async () => {
    // before: ~40 s for 32,000 nulls (quadratic report) with /ok stalled; minutes and ~2 GB for a million
    const nulls = await send("POST", "/store/namespaces", { suffix: new Array(32_000).fill(null) });
    expect(nulls.status).toBe(422);
    expect((nulls.body as { detail: unknown[] }).detail.length).toBeLessThanOrEqual(100);
    expect((nulls.body as { detail: unknown[] }).detail[0]).toEqual({ loc: ["body", "suffix", 0], msg: "Input should be a valid string", type: "string_type" });
    const million = `{"namespace":["a"],"key":"k","value":{},"index":[${new Array(1_000_000).fill("1").join(",")}]}`;
    const index = await send("PUT", "/store/items", million);
    expect(index.status).toBe(422);
    expect((index.body as { detail: unknown[] }).detail.length).toBeLessThanOrEqual(100);
    const t = await fx.client.threads.create();
    const modes = await send(
      "POST",
      `/threads/${t.thread_id}/runs/stream`,
      `{"assistant_id":"echo","stream_mode":[${new Array(1_000_000).fill("0").join(",")}]}`,
    );
    expect(modes.status).toBe(422);
    expect((await raw("/ok")).status).toBe(200);
  });
});

describe("keys longer than LMDB takes", () => {
  const long = "a".repeat(4000);

  it("are refused up front: 422 in bodies and queries, 404 for path lookups (before: 500 RangeError)", async () => {
    expect(await raw(`/assistants/${long}`)).toMatchObject({ status: 404, body: { detail: "Not Found: assistant_id is longer than 256 characters" } });
    const run = await send("POST", "/runs/wait", { assistant_id: long });
    expect(run).toMatchObject({ status: 422, body: { detail: [{ loc: ["body", "assistant_id"], type: "string_too_long" }] } });
    const label = await send("PUT", "/store/items", { namespace: [long], key: "k", value: {} });
    expect(label).toMatchObject({ status: 422, body: { detail: [{ loc: ["body", "namespace", 0], type: "string_too_long" }] } });
    const key = await send("PUT", "/store/items", { namespace: ["a"], key: long, value: {} });
    expect(key).toMatchObject({ status: 422, body: { detail: [{ loc: ["body", "key"], type: "string_too_long" }] } });
    expect((await raw(`/store/items?namespace=a&key=${long}`)).status).toBe(422);
    expect((await send("POST", "/store/namespaces", { prefix: [long] })).status).toBe(422);
    // labels each within bounds, too many bytes in all (a euro sign is 3 bytes of UTF-8)
    const wide = await send("PUT", "/store/items", { namespace: ["€".repeat(150), "€".repeat(150)], key: "k", value: {} });
    expect(wide).toMatchObject({ status: 422, body: { detail: [{ loc: ["body", "namespace"], type: "string_too_long" }] } });
    const t = await fx.client.threads.create();
    const ns = await send("POST", `/threads/${t.thread_id}/state/checkpoint`, { checkpoint: { checkpoint_ns: long } });
    expect(ns).toMatchObject({ status: 422, body: { detail: [{ loc: ["body", "checkpoint", "checkpoint_ns"], type: "string_too_long" }] } });
    const cfg = await send("POST", `/threads/${t.thread_id}/runs/wait`, { assistant_id: "echo", config: { configurable: { checkpoint_ns: long } } });
    expect(cfg.status).toBe(422);
    expect((await raw("/ok")).status).toBe(200);
  });

  it("at the documented maximum, in 4-byte characters, still fit", async () => {
    const namespace = ["😀".repeat(192)]; // 768 bytes
    const key = "😀".repeat(256); // 1 KiB
    expect((await send("PUT", "/store/items", { namespace, key, value: { v: 1 }, ttl: 5 })).status).toBe(204);
    const item = await fx.client.store.getItem(namespace, key);
    expect(item?.value).toEqual({ v: 1 });
    expect((await send("POST", "/store/items/search", { namespace_prefix: namespace })).status).toBe(200);
    const graphNamed = await send("POST", "/runs/wait", { assistant_id: "b".repeat(256) });
    expect(graphNamed.status).toBe(404);
  });

  it("show their maximum in the OpenAPI document", async () => {
    const doc = (await raw("/openapi.json")).body as {
      paths: Record<
        string,
        Record<
          string,
          {
            parameters: { name: string; schema: { maxLength?: number } }[];
            requestBody?: {
              content: { "application/json": { schema: { properties: Record<string, { maxLength?: number; items?: { maxLength?: number } }> } } };
            };
          }
        >
      >;
    };
    const put = doc.paths["/store/items"].put.requestBody!.content["application/json"].schema.properties;
    expect(put.key.maxLength).toBe(256);
    expect(put.namespace.items?.maxLength).toBe(192);
    expect(doc.paths["/assistants/{assistant_id}"].get.parameters.find((p) => p.name === "assistant_id")?.schema.maxLength).toBe(256);
    expect(doc.paths["/runs/wait"].post.requestBody!.content["application/json"].schema.properties.assistant_id.maxLength).toBe(256);
  });
});

describe("found by the fuzz test", () => {
  it("a run scheduled past any valid date is a 422 (before: 500 'Invalid time value')", async () => {
    const far = await send("POST", "/runs/wait", { assistant_id: "echo", after_seconds: 1e15 });
    expect(far).toMatchObject({ status: 422, body: { detail: [{ loc: ["body", "after_seconds"], type: "less_than_equal" }] } });
  });

  it("a huge history `before` or A2A task id is no key lookup (before: 500 / JSON-RPC internal error)", async () => {
    const t = await fx.client.threads.create();
    expect((await send("POST", `/threads/${t.thread_id}/history`, { before: "q".repeat(100_000) })).status).toBe(422);
    const call = (method: string) => send("POST", "/a2a/echo", { jsonrpc: "2.0", id: 1, method, params: { id: "q".repeat(100_000) } });
    for (const method of ["tasks/get", "tasks/cancel"]) {
      const r = await call(method);
      expect((r.body as { error: { code: number } }).error.code).not.toBe(-32603);
    }
  });
});

describe("state updates that are the caller's fault", () => {
  it("answer 4xx with a clear message, not 500", async () => {
    const empty = await send("POST", "/threads", { graph_id: "echo", supersteps: [{ updates: [] }] });
    expect(empty.status).toBe(422);
    expect((empty.body as { detail: { loc: unknown[]; type: string }[] }).detail[0]).toMatchObject({
      loc: ["body", "supersteps", 0, "updates"],
      type: "too_short",
    });

    const t = await fx.client.threads.create();
    await fx.client.runs.wait(t.thread_id, "echo", { input: human("hi") });
    const noSubgraph = await send("POST", `/threads/${t.thread_id}/state`, { values: { messages: [] }, checkpoint: { checkpoint_ns: "x" } });
    expect(noSubgraph).toMatchObject({ status: 400, body: { detail: 'Subgraph "x" not found' } });

    // a run that only applied a command.update: no node has seen the state, LangGraph cannot infer as_node
    const cmdOnly = await fx.client.threads.create();
    await fx.client.runs.wait(cmdOnly.thread_id, "echo", { command: { update: { messages: [{ role: "human", content: "x" }] } } });
    const inferred = await send("POST", `/threads/${cmdOnly.thread_id}/state`, { values: { messages: [] } });
    expect(inferred.status).toBe(400);
    expect((inferred.body as { detail: string }).detail).toMatch(/^Ambiguous update, specify "as_node"/);
    // naming the node works
    expect((await send("POST", `/threads/${cmdOnly.thread_id}/state`, { values: { messages: [] }, as_node: "echo" })).status).toBe(200);
  });

  it("reading the state of a checkpoint the thread does not have is a 404", async () => {
    const t = await fx.client.threads.create();
    await fx.client.runs.wait(t.thread_id, "echo", { input: human("hi") });
    const unknown = "1f0b0000-0000-6000-8000-000000000000";
    const state = await raw(`/threads/${t.thread_id}/state/${unknown}`);
    expect(state).toMatchObject({ status: 404, body: { detail: `Checkpoint ${unknown} not found on thread ${t.thread_id}` } });
    const posted = await send("POST", `/threads/${t.thread_id}/state/checkpoint`, { checkpoint: { checkpoint_id: unknown } });
    expect(posted.status).toBe(404);
    // a checkpoint it has still reads
    const latest = await fx.client.threads.getState(t.thread_id);
    expect((await raw(`/threads/${t.thread_id}/state/${latest.checkpoint.checkpoint_id}`)).status).toBe(200);
  });
});
