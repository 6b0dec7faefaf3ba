// A2A and MCP endpoints against a spawned server, spoken with plain fetch as an external
// agent or MCP client would: JSON-RPC envelopes, agent cards, task/context mapping, SSE.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO, startTestServer, type TestServer } from "./helpers/server.ts";

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server?.stop();
  server?.cleanup();
});

type Obj = Record<string, any>;

async function post(
  path: string,
  body: unknown,
  accept = "application/json, text/event-stream",
): Promise<{ status: number; text: string; json: Obj; headers: Headers }> {
  const res = await fetch(server.url + path, {
    method: "POST",
    headers: { "content-type": "application/json", accept },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: Obj = {};
  try {
    json = JSON.parse(text) as Obj;
  } catch {
    /* empty or SSE */
  }
  return { status: res.status, text, json, headers: res.headers };
}

const rpc = (method: string, params?: Obj, id: number | string = 1) => ({ jsonrpc: "2.0", id, method, ...(params ? { params } : {}) });
const mcp = (method: string, params?: Obj) => post("/mcp", rpc(method, params));
const a2a = (assistant: string, method: string, params?: Obj, accept?: string) => post(`/a2a/${assistant}`, rpc(method, params), accept);
const textMsg = (text: string, extra: Obj = {}) => ({ message: { role: "user", messageId: randomUUID(), parts: [{ kind: "text", text }], ...extra } });
const texts = (msg: Obj): string[] => (msg.parts as Obj[]).map((p) => p.text as string);

function sseResults(text: string): Obj[] {
  return text
    .split("\n\n")
    .map((chunk) =>
      chunk
        .split("\n")
        .filter((l) => l.startsWith("data: "))
        .map((l) => l.slice(6))
        .join("\n"),
    )
    .filter((d) => d !== "")
    .map((d) => JSON.parse(d) as Obj);
}

describe("MCP", () => {
  it("initializes statelessly", async () => {
    const r = await mcp("initialize", { protocolVersion: "2024-11-05", capabilities: {}, clientInfo: { name: "t", version: "0" } });
    expect(r.status).toBe(200);
    expect(r.headers.get("mcp-session-id")).toBeNull();
    expect(r.json).toMatchObject({
      jsonrpc: "2.0",
      id: 1,
      result: { protocolVersion: "2024-11-05", capabilities: { tools: { listChanged: false } }, serverInfo: { name: "LangGraph" } },
    });
    expect(r.json.result.serverInfo.version).toMatch(/^\d+\.\d+\.\d+/);
  });

  it("lists one tool per assistant with the graph input schema", async () => {
    const r = await mcp("tools/list");
    const tools = r.json.result.tools as Obj[];
    const echo = tools.find((t) => t.name === "echo");
    expect(echo).toBeDefined();
    expect(echo!.inputSchema.type).toBe("object");
    expect(echo!.inputSchema.properties.messages.type).toBe("array");
    expect(echo!.inputSchema.$schema).toBeUndefined();
    expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(["agent", "error", "slow"]));
    expect(r.json.result.nextCursor).toBeUndefined();
    expect((await mcp("tools/list", { cursor: "abc" })).json.error.code).toBe(-32602);
  });

  it("calls a tool as a stateless run and returns its output as text", async () => {
    const r = await mcp("tools/call", { name: "echo", arguments: { messages: [{ role: "user", content: "hello from mcp" }] } });
    expect(r.json.result.isError).toBe(false);
    const [content] = r.json.result.content as Obj[];
    expect(content.type).toBe("text");
    const out = JSON.parse(content.text as string) as Obj;
    expect(out.messages.map((m: Obj) => [m.type, m.content])).toEqual([
      ["human", "hello from mcp"],
      ["ai", "hello from mcp"],
    ]);
  });

  it("reports a graph failure as a tool error, and unknown tools as -32602", async () => {
    const failed = await mcp("tools/call", { name: "error", arguments: { messages: [{ role: "user", content: "x" }] } });
    expect(failed.json.result.isError).toBe(true);
    expect(failed.json.result.content[0].text).toContain("Boo!");
    const unknown = await mcp("tools/call", { name: "no_such_tool", arguments: {} });
    expect(unknown.json.error).toMatchObject({ code: -32602, message: expect.stringContaining("Unknown tool") });
  });

  it("answers notifications with 202, unknown methods with -32601 and bad envelopes with 400", async () => {
    const n = await post("/mcp", { jsonrpc: "2.0", method: "notifications/initialized" });
    expect(n.status).toBe(202);
    expect(n.text).toBe("");
    expect((await mcp("resources/list")).json.error.code).toBe(-32601);
    const bad = await post("/mcp", { id: 1, method: "initialize" });
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe(-32600);
    const batch = await post("/mcp", [rpc("ping", undefined, 7), { jsonrpc: "2.0", method: "notifications/x" }]);
    expect(batch.json).toEqual([{ jsonrpc: "2.0", id: 7, result: {} }]);
  });

  it("enforces the transport rules: Accept header, GET 405, DELETE 404", async () => {
    const noAccept = await post("/mcp", rpc("initialize"), "text/html");
    expect(noAccept.status).toBe(400);
    expect(typeof noAccept.json.error).toBe("string");
    expect((await fetch(server.url + "/mcp")).status).toBe(405);
    const del = await fetch(server.url + "/mcp", { method: "DELETE" });
    expect(del.status).toBe(404);
    expect(((await del.json()) as Obj).error).toBeDefined();
  });

  it("pages tools/list by integer cursor, 100 per page", async () => {
    await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        fetch(server.url + "/assistants", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ graph_id: "echo", name: `bulk ${i}` }),
        }),
      ),
    );
    const first = await mcp("tools/list");
    expect(first.json.result.tools).toHaveLength(100);
    expect(first.json.result.nextCursor).toBe("100");
    const second = await mcp("tools/list", { cursor: first.json.result.nextCursor });
    const names = [...first.json.result.tools, ...second.json.result.tools].map((t: Obj) => t.name as string);
    expect(second.json.result.nextCursor).toBeUndefined();
    expect(new Set(names).size).toBe(names.length);
    expect(names).toContain("bulk_42"); // sanitised name
  });
});

describe("A2A", () => {
  it("serves the agent card under both paths", async () => {
    const card = (await (await fetch(`${server.url}/.well-known/agent-card.json?assistant_id=echo`)).json()) as Obj;
    expect(card.name).toBe("echo");
    expect(card.url).toBe(`${server.url}/a2a/046b5dc7-2108-582c-9c6c-31d556d138f0`);
    expect(card.capabilities).toMatchObject({ streaming: true, pushNotifications: false });
    expect(card.supportedInterfaces).toEqual([{ url: card.url, protocolBinding: "JSONRPC", protocolVersion: "1.0" }]);
    expect(card.skills[0].id).toBe("046b5dc7-2108-582c-9c6c-31d556d138f0-main");
    expect(card.version).toMatch(/^\d+\.\d+\.\d+/);
    const byPath = (await (await fetch(`${server.url}/a2a/echo/.well-known/agent-card.json`)).json()) as Obj;
    expect(byPath).toEqual(card);
    const missing = await fetch(`${server.url}/.well-known/agent-card.json`);
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as Obj).error.code).toBe(-32602);
  });

  it("message/send runs the assistant and returns a completed task (v0.3 casing)", async () => {
    const r = await a2a("echo", "message/send", textMsg("hello a2a"));
    const task = r.json.result as Obj;
    expect(task.kind).toBe("task");
    expect(task.status.state).toBe("completed");
    expect(task.artifacts[0].name).toBe("Assistant Response");
    expect(texts(task.artifacts[0])).toEqual(["hello a2a"]);
    expect(task.history.map((m: Obj) => [m.role, texts(m)[0]])).toEqual([
      ["user", "hello a2a"],
      ["agent", "hello a2a"],
    ]);
    // contextId is a real thread, taskId a real run on it
    const run = await fetch(`${server.url}/threads/${task.contextId}/runs/${task.id}`);
    expect(((await run.json()) as Obj).status).toBe("success");
  });

  it("SendMessage uses v1.0 enum casing and wraps the task", async () => {
    const r = await a2a("echo", "SendMessage", { message: { role: "ROLE_USER", messageId: randomUUID(), parts: [{ text: "v1 hello" }] } });
    const task = r.json.result.task as Obj;
    expect(task.status.state).toBe("TASK_STATE_COMPLETED");
    expect(task.kind).toBeUndefined();
    expect(task.history.map((m: Obj) => m.role)).toEqual(["ROLE_USER", "ROLE_AGENT"]);
    expect(task.artifacts[0].parts).toEqual([{ text: "v1 hello" }]);
  });

  it("keeps a conversation in one context (thread) across tasks", async () => {
    const contextId = randomUUID();
    // a careless client reusing one messageId must not overwrite the earlier turn
    const first = (await a2a("echo", "message/send", textMsg("first", { contextId, messageId: "reused-id" }))).json.result as Obj;
    const second = (await a2a("echo", "message/send", textMsg("second", { contextId, messageId: "reused-id" }))).json.result as Obj;
    expect(first.contextId).toBe(contextId);
    expect(second.contextId).toBe(contextId);
    expect(second.id).not.toBe(first.id);
    expect(second.history.map((m: Obj) => texts(m)[0])).toEqual(["first", "first", "second", "second"]);
    expect(second.history[2].messageId).toBe("reused-id"); // the client's id is echoed back
    expect(second.history.map((m: Obj) => m.taskId)).toEqual([undefined, undefined, second.id, second.id]);
    const scoped = (await a2a("echo", "tasks/get", { id: second.id, historyScope: "task" })).json.result as Obj;
    expect(scoped.history.map((m: Obj) => texts(m)[0])).toEqual(["second", "second"]);
    const listed = (await a2a("echo", "ListTasks", { contextId })).json.result as Obj;
    expect(listed.tasks.map((t: Obj) => t.id)).toEqual([second.id, first.id]);
    expect(listed.totalSize).toBe(2);
    expect(listed.tasks[0].status.state).toBe("TASK_STATE_COMPLETED");
  });

  it("rejects a non-UUID contextId and unknown or finished task ids", async () => {
    const bad = await a2a("echo", "message/send", textMsg("x", { contextId: "not-a-uuid" }));
    expect(bad.json.error).toEqual({ code: -32602, message: "Failed to create run: Invalid thread ID" });
    const done = (await a2a("echo", "message/send", textMsg("once"))).json.result as Obj;
    expect((await a2a("echo", "message/send", textMsg("again", { taskId: done.id }))).json.error.code).toBe(-32004);
    expect((await a2a("echo", "tasks/get", { id: randomUUID() })).json.error.code).toBe(-32001);
    expect((await a2a("agent", "tasks/get", { id: done.id })).json.error.code).toBe(-32001); // another assistant's task
    expect((await a2a("echo", "tasks/get", { id: done.id, historyLength: 11 })).json.error.code).toBe(-32602);
    expect((await a2a("echo", "tasks/resubscribe", { id: done.id })).json.error.code).toBe(-32601);
  });

  it("tasks/get returns the stored task, honouring historyLength", async () => {
    const sent = (await a2a("echo", "message/send", textMsg("remember me"))).json.result as Obj;
    const got = (await a2a("echo", "tasks/get", { id: sent.id, historyLength: 1 })).json.result as Obj;
    expect(got.id).toBe(sent.id);
    expect(got.status.state).toBe("completed");
    expect(got.history).toHaveLength(1);
    expect(got.history[0].role).toBe("agent");
    expect(texts(got.artifacts[0])).toEqual(["remember me"]);
  });

  it("merges data parts into the graph input", async () => {
    const r = await a2a("echo", "message/send", {
      message: { role: "user", messageId: randomUUID(), parts: [{ kind: "data", data: { messages: [{ role: "human", content: "from data" }] } }] },
    });
    expect(texts(r.json.result.artifacts[0])).toEqual(["from data"]);
  });

  it("streams the task, status updates, the artifact and a final status (SSE)", async () => {
    const r = await a2a("echo", "message/stream", textMsg("stream me"), "text/event-stream");
    expect(r.headers.get("content-type")).toContain("text/event-stream");
    const events = sseResults(r.text).map((e) => e.result as Obj);
    expect(events[0]).toMatchObject({ kind: "task", status: { state: "submitted" } });
    expect(events.some((e) => e.kind === "status-update" && e.status.state === "working")).toBe(true);
    const artifact = events.find((e) => e.kind === "artifact-update");
    expect(texts(artifact!.artifact)).toEqual(["stream me"]);
    const last = events.at(-1)!;
    expect(last).toMatchObject({ kind: "status-update", final: true, status: { state: "completed" }, taskId: events[0].id });

    const v1 = sseResults((await a2a("echo", "SendStreamingMessage", textMsg("v1 stream"), "text/event-stream")).text).map((e) => e.result as Obj);
    expect(v1[0].task.status.state).toBe("TASK_STATE_SUBMITTED");
    expect(v1.at(-1)!.statusUpdate).toMatchObject({ final: true, status: { state: "TASK_STATE_COMPLETED" } });

    const notSse = await a2a("echo", "message/stream", textMsg("x"), "application/json");
    expect(notSse.status).toBe(400);
    expect(typeof notSse.json.error).toBe("string");
  });

  it("reports a failing graph as a failed task", async () => {
    const task = (await a2a("error", "message/send", textMsg("boom"))).json.result as Obj;
    expect(task.status.state).toBe("failed");
    expect(texts(task.status.message).join("")).toContain("Boo!");
    const streamed = sseResults((await a2a("error", "message/stream", textMsg("boom"), "text/event-stream")).text).map((e) => e.result as Obj);
    expect(streamed.at(-1)).toMatchObject({ final: true, status: { state: "failed" } });
  });

  it("maps an interrupt to input-required and resumes it with the next message on the same task", async () => {
    const created = await fetch(server.url + "/assistants", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ graph_id: "agent", name: "approver", config: { configurable: { require_approval: true } } }),
    });
    const { assistant_id } = (await created.json()) as Obj;
    const asked = (await a2a(assistant_id, "message/send", textMsg("What's the weather in Paris?"))).json.result as Obj;
    expect(asked.status.state).toBe("input-required");
    expect(asked.status.message.parts[0].data.question).toMatch(/Approve/);
    const resumed = (await a2a(assistant_id, "message/send", textMsg("approve", { taskId: asked.id, contextId: asked.contextId }))).json.result as Obj;
    expect(resumed.status.state).toBe("completed");
    expect(texts(resumed.artifacts[0]).join("")).toContain("sunny");
  });

  it("cancels a running task", async () => {
    const created = await fetch(server.url + "/assistants", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ graph_id: "slow", name: "sleepy", config: { configurable: { sleep_ms: 10_000 } } }),
    });
    const { assistant_id } = (await created.json()) as Obj;
    const started = (await a2a(assistant_id, "message/send", { ...textMsg("zzz"), configuration: { blocking: false } })).json.result as Obj;
    expect(["submitted", "working"]).toContain(started.status.state);
    const t0 = Date.now();
    const canceled = (await a2a(assistant_id, "tasks/cancel", { id: started.id })).json.result as Obj;
    expect(canceled.status.state).toBe("canceled");
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect((await a2a(assistant_id, "CancelTask", { id: started.id })).json.error.code).toBe(-32002);
  });

  it("refuses other verbs, bad envelopes and unknown assistants", async () => {
    expect((await fetch(server.url + "/a2a/echo")).status).toBe(405);
    expect((await fetch(server.url + "/a2a/echo", { method: "DELETE" })).status).toBe(405);
    const badVersion = await post("/a2a/echo", { jsonrpc: "1.0", id: 1, method: "tasks/get" });
    expect(badVersion.status).toBe(400);
    expect(badVersion.json.error.code).toBe(-32600);
    const missing = await a2a("no-such-assistant", "message/send", textMsg("x"));
    expect(missing.status).toBe(404);
    expect(missing.json.error.code).toBe(-32602);
    // a text part must carry its text
    for (const part of [{ kind: "text", text: 5 }, { kind: "text" }]) {
      const bad = await a2a("echo", "message/send", { message: { role: "user", messageId: randomUUID(), parts: [part] } });
      expect(bad.json.error).toMatchObject({ code: -32602, message: expect.stringContaining("text part") });
    }
  });

  it("answers a notification (no id) with 202 and no body, and still starts its task", async () => {
    const contextId = randomUUID();
    const { id: _, ...notification } = rpc("message/send", textMsg("fire and forget", { contextId }));
    const r = await post("/a2a/echo", notification);
    expect(r).toMatchObject({ status: 202, text: "" });
    let runs: Obj[] = [];
    for (let i = 0; i < 100 && runs[0]?.status !== "success"; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      const res = await fetch(`${server.url}/threads/${contextId}/runs`);
      runs = res.status === 200 ? ((await res.json()) as Obj[]) : [];
    }
    expect(runs.map((run) => run.status)).toEqual(["success"]);
    expect((await post("/a2a/echo", { jsonrpc: "2.0", method: "no/such/method" })).status).toBe(202);
  });
});

describe("http.disable_mcp / http.disable_a2a", () => {
  it("removes both endpoint groups", async () => {
    const dir = mkdtempSync(join(tmpdir(), "troupe-a2a-off-"));
    const config = join(dir, "service.json");
    writeFileSync(config, JSON.stringify({ graphs: { echo: join(REPO, "examples/echo.ts") + ":graph" }, http: { disable_mcp: true, disable_a2a: true } }));
    const off = await startTestServer({ config, workers: 1 });
    try {
      const res = await fetch(off.url + "/mcp", {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json" },
        body: JSON.stringify(rpc("initialize")),
      });
      expect(res.status).toBe(404);
      expect(
        (
          await fetch(off.url + "/a2a/echo", {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify(rpc("tasks/get", { id: "x" })),
          })
        ).status,
      ).toBe(404);
      expect((await fetch(`${off.url}/.well-known/agent-card.json?assistant_id=echo`)).status).toBe(404);
      expect((await fetch(off.url + "/ok")).status).toBe(200);
    } finally {
      await off.stop();
      off.cleanup();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
