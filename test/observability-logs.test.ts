// Structured logs end to end (issue 23): JSON lines with request ids, request and run lifecycle
// lines, the graph logger (getLogger() at import and in a node) tagged with the run's ids, no
// secret anywhere in the server's output, `troupe dev`'s readable lines with the per-second
// summary past the request-line budget, and LOG_LEVEL.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import { REPO, startTestServer, type TestServer } from "./helpers/server.ts";
import { waitUntil } from "./helpers/wait.ts";

const FIXTURES = join(REPO, "test/fixtures/observability");
const human = (content: string) => ({ messages: [{ role: "human", content }] });

type Line = Record<string, unknown> & { level: string; time: string; msg: string };

/** The JSON lines of a server's output (other lines: the listening line and Node's own warnings). */
function jsonLines(out: string): Line[] {
  return out
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Line);
}

describe("troupe serve: JSON lines", () => {
  const SECRETS = {
    token: "tok-SECRET-7f3a9c",
    webhookHeader: "whsec-SECRET-51bd20",
    urlPassword: "pw-SECRET-c0ffee",
    urlQuery: "qs-SECRET-d00d",
    apiKey: "key-SECRET-8e8e8e",
  };
  let server: TestServer;
  let client: Client;

  beforeAll(async () => {
    server = await startTestServer({
      command: "serve",
      config: join(FIXTURES, "service-secrets.json"),
      extraArgs: ["--host", "127.0.0.1", "--rate-limit", "off"],
      env: { OBS_TEST_TOKEN: SECRETS.token, LG_WEBHOOK_OBS_SECRET: SECRETS.webhookHeader },
    });
    client = new Client({ apiUrl: server.url, apiKey: null, defaultHeaders: { Authorization: `Bearer ${SECRETS.token}`, "X-Api-Key": SECRETS.apiKey } });
  });
  afterAll(async () => {
    await server?.stop();
    server?.cleanup();
  });

  it("writes one JSON line per request with its id, route template, status and duration; X-Request-Id is echoed or made up", async () => {
    const t = await client.threads.create();
    const res = await fetch(`${server.url}/threads/${t.thread_id}`, { headers: { authorization: `Bearer ${SECRETS.token}`, "x-request-id": "obs-req-1" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-request-id")).toBe("obs-req-1");
    const made = await fetch(`${server.url}/threads/${t.thread_id}`, {
      headers: { authorization: `Bearer ${SECRETS.token}`, "x-request-id": "not a plain token" },
    });
    const madeId = made.headers.get("x-request-id") ?? "";
    expect(madeId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    const next = (await fetch(`${server.url}/ok`, { headers: { authorization: `Bearer ${SECRETS.token}` } })).headers.get("x-request-id");
    expect(next).not.toBe(madeId); // unique per request

    const line = await waitUntil(() => jsonLines(server.output()).find((l) => l.req_id === "obs-req-1"), { what: "the request's line" });
    expect(line).toMatchObject({
      level: "info",
      msg: "request",
      component: "http",
      method: "GET",
      route: "/threads/:thread_id",
      path: `/threads/${t.thread_id}`,
      status: 200,
    });
    expect(typeof line.duration_ms).toBe("number");
    expect(Number.isNaN(Date.parse(line.time))).toBe(false);
    await waitUntil(() => jsonLines(server.output()).find((l) => l.req_id === madeId), { what: "the made-up id in the log" });
    // every line the server wrote, but the one tests wait for, is JSON
    const other = server
      .output()
      .split("\n")
      .filter((l) => l !== "" && !l.startsWith("{") && !l.startsWith("troupe listening on") && !l.startsWith("(node:") && !l.startsWith("(Use `node"));
    expect(other).toEqual([]);
  });

  it("writes run lifecycle lines with the run's ids, attempt, status, duration and error", async () => {
    const t = await client.threads.create();
    const ok = await client.runs.create(t.thread_id, "echo", { input: human("hello") });
    await client.runs.join(t.thread_id, ok.run_id);
    const bad = await client.runs.create(t.thread_id, "error", { input: human("boom") });
    await client.runs.join(t.thread_id, bad.run_id).catch(() => undefined);
    const lines = await waitUntil(
      () => {
        const all = jsonLines(server.output()).filter((l) => l.component === "runs");
        return all.some((l) => l.run_id === bad.run_id && l.msg === "run failed") ? all : undefined;
      },
      { what: "the failed run's line" },
    );
    const ids = { thread_id: t.thread_id, assistant_id: expect.any(String), attempt: 1 };
    expect(lines.find((l) => l.run_id === ok.run_id && l.msg === "run started")).toMatchObject({
      ...ids,
      level: "info",
      graph_id: "echo",
      queue_wait_ms: expect.any(Number),
    });
    expect(lines.find((l) => l.run_id === ok.run_id && l.msg === "run finished")).toMatchObject({
      ...ids,
      level: "info",
      graph_id: "echo",
      status: "success",
      duration_ms: expect.any(Number),
    });
    expect(lines.find((l) => l.run_id === bad.run_id && l.msg === "run failed")).toMatchObject({
      ...ids,
      level: "warn",
      graph_id: "error",
      status: "error",
      duration_ms: expect.any(Number),
      error: { error: "CustomError", message: "Boo!" },
    });
  });

  it("gives graphs getLogger(): lines from the module's import and from inside a node, tagged with the run, thread and node", async () => {
    // the graph module loaded (it calls getLogger() at import): the first run and its schemas work
    const [assistant] = await client.assistants.search({ graphId: "logger_graph" });
    expect(await client.assistants.getSchemas(assistant.assistant_id)).toHaveProperty("input_schema");
    const t = await client.threads.create();
    const out = (await client.runs.wait(t.thread_id, "logger_graph", { input: human("make some noise") })) as { messages: { content: string }[] };
    expect(out.messages.at(-1)?.content).toBe("MAKE SOME NOISE");
    const [run] = await client.runs.list(t.thread_id);
    const graphLines = await waitUntil(
      () => {
        const all = jsonLines(server.output()).filter((l) => l.component === "graph");
        return all.some((l) => l.msg.startsWith("loud:")) ? all : undefined;
      },
      { what: "the node's warning" },
    );
    expect(graphLines.find((l) => l.msg === "logger_graph module loaded")).toMatchObject({ level: "info", module: "logger_graph" });
    // custom auth, loaded on the HTTP thread, has it too
    expect(graphLines.find((l) => l.msg === "auth module loaded")).toMatchObject({ level: "info", module: "auth", thread: "http" });
    const runIds = { run_id: run.run_id, thread_id: t.thread_id, graph_id: "logger_graph", assistant_id: assistant.assistant_id, node: "shout" };
    expect(graphLines.find((l) => l.msg === "shouting")).toMatchObject({ ...runIds, level: "info", words: 3 });
    expect(graphLines.find((l) => l.msg === "loud: MAKE SOME NOISE")).toMatchObject({ ...runIds, level: "warn" });
  });

  it("never writes a secret: bearer tokens, API keys, webhook header values, URL passwords and query strings", async () => {
    const t = await client.threads.create();
    // a webhook whose URL carries userinfo and a token in its query: its delivery fails (no such host) and is logged
    await client.runs.wait(t.thread_id, "echo", {
      input: human("x"),
      webhook: `https://hook-user:${SECRETS.urlPassword}@troupe-test.invalid/hook?token=${SECRETS.urlQuery}`,
    });
    const failure = await waitUntil(() => jsonLines(server.output()).find((l) => String(l.msg).includes("troupe-test.invalid")), {
      what: "the delivery failure",
      timeoutMs: 20_000,
    });
    expect(failure.msg).toContain("https://hook-user:***@troupe-test.invalid/hook?…");
    // requests with the secrets in headers, refused ones included
    await fetch(`${server.url}/threads/search`, {
      method: "POST",
      headers: { authorization: "Bearer wrong-token", "x-api-key": SECRETS.apiKey, "content-type": "application/json" },
      body: "{}",
    });
    await fetch(`${server.url}/threads?api_key=${SECRETS.apiKey}`, {
      method: "POST",
      headers: { authorization: `Bearer ${SECRETS.token}`, "content-type": "application/json" },
      body: "{}",
    });
    await waitUntil(() => jsonLines(server.output()).find((l) => l.route === "/threads" && l.status === 200 && l.method === "POST"), {
      what: "the last request's line",
    });
    const out = server.output();
    for (const [what, secret] of Object.entries(SECRETS)) expect(out.includes(secret), `${what} in the server's output`).toBe(false);
  });
});

describe("troupe dev: readable lines", () => {
  let dev: TestServer;
  beforeAll(async () => {
    dev = await startTestServer({ config: join(FIXTURES, "service-no-meta.json") });
  });
  afterAll(async () => {
    await dev?.stop();
    dev?.cleanup();
  });

  it("prints time, level, component and message, and summarizes requests past the per-second budget", async () => {
    const N = 30;
    await Promise.all(Array.from({ length: N }, () => fetch(`${dev.url}/ok`).then((r) => r.text())));
    const out = await waitUntil(() => (/requests summary/.test(dev.output()) ? dev.output() : undefined), { what: "the summary line" });
    expect(out).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO {2}\[http\] request req_id=\S+ method=GET route=\/ok path=\/ok status=200 duration_ms=[\d.]+$/m);
    expect(out.split("\n").some((l) => l.startsWith("{"))).toBe(false);
    // each request is either its own line or counted in a summary (budget: 3 lines a second)
    const single = out.split("\n").filter((l) => / request req_id=.* route=\/ok /.test(l)).length;
    const summarized = [...out.matchAll(/requests summary requests=(\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
    expect(single).toBeLessThan(N);
    expect(single + summarized).toBe(N);
  });
});

describe("LOG_LEVEL", () => {
  let quiet: TestServer;
  beforeAll(async () => {
    quiet = await startTestServer({
      command: "serve",
      config: join(FIXTURES, "service.json"),
      extraArgs: ["--host", "127.0.0.1", "--rate-limit", "off"],
      env: { LOG_LEVEL: "WARNING" },
    });
  });
  afterAll(async () => {
    await quiet?.stop();
    quiet?.cleanup();
  });

  it("sets the level (Python's names too): at warning, no request or run lines, warnings still", async () => {
    const client = new Client({ apiUrl: quiet.url, apiKey: null });
    const t = await client.threads.create();
    await client.runs.wait(t.thread_id, "echo", { input: human("quiet") });
    await client.runs.wait(t.thread_id, "logger_graph", { input: human("quiet please") });
    await waitUntil(() => jsonLines(quiet.output()).find((l) => String(l.msg).startsWith("loud:")), { what: "the graph's warning" });
    const lines = jsonLines(quiet.output());
    expect(lines.filter((l) => l.level === "info" || l.level === "debug")).toEqual([]);
  });
});
