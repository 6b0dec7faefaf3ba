// Security hardening (issue 16) of custom auth on a real `troupe serve` (not the loopback `dev`):
// A2A and MCP apply the same per-resource rules as the REST routes, the Studio header opens
// nothing unless the operator opts in, a run cannot use another user's assistant, and CORS's
// allow_origin_regex must match the whole origin. Real SDK clients and plain fetch, as attackers would.
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@langchain/langgraph-sdk";
import { REPO, startTestServer, type TestServer } from "./helpers/server.ts";

type Obj = Record<string, any>;
const CONFIG = join(REPO, "test/fixtures/auth/service-serve.json");
const human = (content: string) => ({ messages: [{ role: "human", content }] });
const AS_A = { Authorization: "Bearer user-a" };
const AS_B = { Authorization: "Bearer user-b" };
const STUDIO = { "x-auth-scheme": "langsmith" };

let server: TestServer;
let a: Client;
let b: Client;

const serve = (config: string) => startTestServer({ command: "serve", config, workers: 1, extraArgs: ["--host", "127.0.0.1", "--rate-limit", "off"] });

beforeAll(async () => {
  server = await serve(CONFIG);
  a = new Client({ apiUrl: server.url, apiKey: null, defaultHeaders: AS_A });
  b = new Client({ apiUrl: server.url, apiKey: null, defaultHeaders: AS_B });
});
afterAll(async () => {
  await server?.stop();
  server?.cleanup();
});

async function post(path: string, body: unknown, headers: Record<string, string>, url = server.url): Promise<{ status: number; json: Obj }> {
  const res = await fetch(url + path, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json", ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? (JSON.parse(text) as Obj) : {} };
}
const rpc = (method: string, params: Obj = {}) => ({ jsonrpc: "2.0", id: 1, method, params });
const a2a = (assistant: string, method: string, params: Obj, headers: Record<string, string>) => post(`/a2a/${assistant}`, rpc(method, params), headers);
const mcp = (method: string, params: Obj, headers: Record<string, string>) => post("/mcp", rpc(method, params), headers);
const message = (text: string, extra: Obj = {}) => ({ message: { role: "ROLE_USER", messageId: randomUUID(), parts: [{ text }], ...extra } });
const TASK_NOT_FOUND = -32001;

describe("A2A under custom auth", () => {
  it("shows a user only their own tasks and contexts", async () => {
    const sent = await a2a("echo", "SendMessage", message("a's secret"), AS_A);
    expect(sent.status).toBe(200);
    const task = sent.json.result.task as Obj;
    expect(task.status.state).toBe("TASK_STATE_COMPLETED");
    expect((await a.threads.get(task.contextId)).metadata).toMatchObject({ owner: "user-a" });

    // A lists and reads its own task
    const mine = await a2a("echo", "ListTasks", {}, AS_A);
    expect((mine.json.result.tasks as Obj[]).map((t) => t.id)).toContain(task.id);
    expect((await a2a("echo", "GetTask", { id: task.id }, AS_A)).json.result.id).toBe(task.id);

    // B sees none of it
    const theirs = await a2a("echo", "ListTasks", {}, AS_B);
    expect((theirs.json.result.tasks as Obj[]).map((t) => t.id)).not.toContain(task.id);
    expect(JSON.stringify(theirs.json)).not.toContain("a's secret");
    const got = await a2a("echo", "GetTask", { id: task.id, historyLength: 10 }, AS_B);
    expect(got.json.error?.code).toBe(TASK_NOT_FOUND);
    expect(JSON.stringify(got.json)).not.toContain("a's secret");
    expect((await a2a("echo", "tasks/get", { id: task.id }, AS_B)).json.error?.code).toBe(TASK_NOT_FOUND);
    // ... cannot continue the task ...
    const cont = await a2a("echo", "SendMessage", message("hijack", { taskId: task.id }), AS_B);
    expect(cont.json.error?.code).toBe(TASK_NOT_FOUND);
    // ... nor run on A's context (thread) and read its history
    const onTheirs = await a2a("echo", "SendMessage", message("b was here", { contextId: task.contextId }), AS_B);
    expect(onTheirs.json.result).toBeUndefined();
    expect(onTheirs.json.error?.message).toMatch(/not found/);
    expect(JSON.stringify(onTheirs.json)).not.toContain("a's secret");
    const state = (await a.threads.getState(task.contextId)).values as { messages: { content: string }[] };
    expect(state.messages.map((m) => m.content)).toEqual(["a's secret", "a's secret"]);
  });

  it("does not let a user cancel another user's running task", async () => {
    const t = await a.threads.create();
    const run = await a.runs.create(t.thread_id, "slow", { input: human("long"), config: { configurable: { sleep_ms: 60_000 } } });
    const byB = await a2a("slow", "CancelTask", { id: run.run_id }, AS_B);
    expect(byB.json.error?.code).toBe(TASK_NOT_FOUND);
    expect((await a.runs.get(t.thread_id, run.run_id)).status).not.toBe("interrupted");
    const byA = await a2a("slow", "CancelTask", { id: run.run_id }, AS_A);
    expect(byA.json.result.status.state).toBe("TASK_STATE_CANCELLED");
  });

  it("hides another user's assistant: its card and its endpoint are not found", async () => {
    const private_ = await b.assistants.create({ graphId: "echo", name: "b-a2a" });
    expect((await fetch(`${server.url}/a2a/${private_.assistant_id}/.well-known/agent-card.json`, { headers: AS_A })).status).toBe(404);
    expect((await fetch(`${server.url}/.well-known/agent-card.json?assistant_id=${private_.assistant_id}`, { headers: AS_A })).status).toBe(404);
    expect((await a2a(private_.assistant_id, "SendMessage", message("x"), AS_A)).status).toBe(404);
    expect((await fetch(`${server.url}/a2a/${private_.assistant_id}/.well-known/agent-card.json`, { headers: AS_B })).status).toBe(200);
  });

  it("answers anonymous calls, with or without the Studio header, with 401", async () => {
    expect((await a2a("echo", "ListTasks", {}, {})).status).toBe(401);
    expect((await a2a("echo", "ListTasks", {}, STUDIO)).status).toBe(401);
    expect((await a2a("echo", "SendMessage", message("x"), STUDIO)).status).toBe(401);
  });
});

describe("MCP under custom auth", () => {
  it("lists and calls only the assistants a user may run", async () => {
    const bs = await b.assistants.create({ graphId: "echo", name: "b-private-tool" });
    const names = async (headers: Record<string, string>) => ((await mcp("tools/list", {}, headers)).json.result.tools as Obj[]).map((t) => t.name);
    expect(await names(AS_B)).toEqual(expect.arrayContaining(["echo", "b-private-tool"]));
    const forA = await names(AS_A);
    expect(forA).toContain("echo"); // the graph's default assistant is everyone's
    expect(forA).not.toContain("b-private-tool");
    const call = await mcp("tools/call", { name: "b-private-tool", arguments: human("x") }, AS_A);
    expect(call.json.error?.message).toMatch(/Unknown tool/);
    const own = await mcp("tools/call", { name: "b-private-tool", arguments: human("mine") }, AS_B);
    expect(own.json.result.isError).toBe(false);
    expect(own.json.result.content[0].text).toContain("mine");
    expect(bs.metadata).toMatchObject({ owner: "user-b" });
  });

  it("answers anonymous calls, with or without the Studio header, with 401", async () => {
    expect((await mcp("tools/list", {}, {})).status).toBe(401);
    expect((await mcp("tools/list", {}, STUDIO)).status).toBe(401);
    expect((await mcp("tools/call", { name: "echo", arguments: human("x") }, STUDIO)).status).toBe(401);
  });
});

describe("runs and another user's assistant", () => {
  it("answers 404 for a run on your own thread with someone else's assistant, and copies nothing", async () => {
    const theirs = await b.assistants.create({ graphId: "echo", name: "b-config", config: { configurable: { secret_prompt: "b's prompt" } } });
    const t = await a.threads.create();
    await expect(a.runs.wait(t.thread_id, theirs.assistant_id, { input: human("hi") })).rejects.toThrow(/HTTP 404/);
    await expect(a.runs.create(t.thread_id, theirs.assistant_id, { input: human("hi") })).rejects.toThrow(/HTTP 404/);
    await expect(a.runs.wait(null, theirs.assistant_id, { input: human("hi") })).rejects.toThrow(/HTTP 404/);
    expect(await a.runs.list(t.thread_id)).toEqual([]);
    expect(JSON.stringify(await a.threads.get(t.thread_id))).not.toContain("b's prompt");
    // the owner and the graph's default assistant still work
    await b.runs.wait(null, theirs.assistant_id, { input: human("hi") });
    await a.runs.wait(t.thread_id, "echo", { input: human("hi") });
  });
});

describe("the Studio header", () => {
  it("opens nothing on troupe serve by default", async () => {
    expect((await post("/threads", {}, STUDIO)).status).toBe(401);
    expect((await post("/threads/search", {}, STUDIO)).status).toBe(401);
  });

  it("acts as the Studio user on troupe serve only with auth.allow_studio_on_serve", async () => {
    const optedIn = await serve(join(REPO, "test/fixtures/auth/service-studio.json"));
    try {
      const created = await post("/threads", {}, STUDIO, optedIn.url);
      expect(created.status).toBe(200);
      expect(created.json.metadata).toMatchObject({ owner: "langgraph-studio-user" });
    } finally {
      await optedIn.stop();
      optedIn.cleanup();
    }
  });
});

describe("CORS", () => {
  const originOf = async (origin: string) => {
    const res = await fetch(`${server.url}/info`, { headers: { origin } });
    await res.text();
    return { allow: res.headers.get("access-control-allow-origin"), credentials: res.headers.get("access-control-allow-credentials") };
  };

  it("allows an origin only when allow_origin_regex matches all of it", async () => {
    expect(await originOf("https://app.example.com")).toEqual({ allow: "https://app.example.com", credentials: "true" });
    expect((await originOf("https://app.example.com.attacker.test")).allow).toBeNull();
    expect((await originOf("https://evil.test/?https://app.example.com")).allow).toBeNull();
    expect((await originOf("https://xapp.example.com")).allow).toBeNull();
  });
});
