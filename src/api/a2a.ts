// A2A endpoint (reference §4.1): JSON-RPC 2.0 at POST /a2a/{assistant_id} with the v1.0 and
// v0.3 method names, plus the agent cards. Context id = thread_id, task id = run_id; the
// protocol work lives in ./protocols/a2a-*.ts, this file routes methods to it.
// Under custom auth a task is its thread's: the same events and filters as the REST routes
// (assistant: assistants:read; get: threads:read; cancel: threads:update; list: threads:search;
// send: threads:create_run), and another user's task answers "not found".
import { matchesAuthFilter, type AuthEvent } from "../auth/index.ts";
import { TroupeError } from "../errors.ts";
import { empty, json, route, type AuthInfo, type Reply, type RouteDef } from "../http/types.ts";
import type { AppContext } from "../server/context.ts";
import { anyValue, body, keyString } from "../http/schemas/common.ts";
import type { AssistantRecord, Json } from "../storage/records.ts";
import { canonicalUuidOf } from "../util/ids.ts";
import { agentCard, baseUrlOf } from "./a2a/card.ts";
import { createTaskRun, taskNotFound } from "./a2a/send.ts";
import { taskStream } from "./a2a/stream.ts";
import { buildTask, loadTask, TaskSourceReader, viewOf, taskState, type HistoryOptions, type TaskSource } from "./a2a/task.ts";
import { A2A_ERRORS, METHODS, parseState, type Dialect } from "./a2a/dialects.ts";
import { inputSchemas } from "./graph-input-schema.ts";
import { accepts, classify, isRecord, RPC, RpcError, rpcError, rpcResult, toRpcError, type RpcId, type RpcParams } from "./jsonrpc.ts";

const TAG = "a2a";
const MAX_HISTORY = 10;
const HISTORY_SCOPE_HEADER = "langgraph-a2a-history-scope";
/** an integer within [min, max] (RPC params are any JSON) */
const intWithin = (v: unknown, min: number, max: number): v is number => typeof v === "number" && Number.isInteger(v) && v >= min && v <= max;

function historyOptions(params: RpcParams, headers: Record<string, string>, defaults: { length?: number; includeArtifacts: boolean }): HistoryOptions {
  const cfg = isRecord(params.configuration) ? params.configuration : {};
  const rawLength = cfg.historyLength ?? params.historyLength;
  if (rawLength !== undefined && rawLength !== null && !intWithin(rawLength, 0, MAX_HISTORY)) {
    throw new RpcError(RPC.INVALID_PARAMS, `Invalid params: historyLength must be an integer between 0 and ${MAX_HISTORY}`);
  }
  const scope = cfg.historyScope ?? params.historyScope ?? headers[HISTORY_SCOPE_HEADER] ?? "context";
  if (scope !== "context" && scope !== "task") throw new RpcError(RPC.INVALID_PARAMS, 'Invalid params: historyScope must be "context" or "task"');
  const length = typeof rawLength === "number" ? rawLength : defaults.length;
  const includeArtifacts = typeof params.includeArtifacts === "boolean" ? params.includeArtifacts : defaults.includeArtifacts;
  return { scope, length, includeArtifacts };
}

/** Task id of GetTask/CancelTask params: `id`, or a v1 resource name `tasks/{id}`. */
function taskIdOf(params: RpcParams): string {
  if (typeof params.id === "string" && params.id) return params.id;
  if (typeof params.name === "string" && params.name.startsWith("tasks/")) return params.name.slice("tasks/".length);
  throw new RpcError(RPC.INVALID_PARAMS, "Invalid params: task id is required");
}

export function a2aRoutes(app: AppContext): RouteDef[] {
  const { storage, pool } = app;
  const schemas = inputSchemas(app);
  const graphDescription = new Map(app.config.graphs.map((g) => [g.graphId, g.description]));

  const card = async (a: AssistantRecord, headers: Record<string, string>) =>
    agentCard({
      assistant: a,
      graphDescription: graphDescription.get(a.graph_id) ?? null,
      inputSchema: await schemas.of(a),
      baseUrl: baseUrlOf(headers),
      version: app.version,
    });

  /** The assistant a path names, if the caller may use it (404 otherwise, as for a missing one). */
  const assistantFor = async (idOrGraph: string, auth: AuthInfo | undefined): Promise<AssistantRecord> => {
    const a = await app.resolveAssistant(idOrGraph);
    await app.auth?.authorizeAssistant(auth, a);
    return a;
  };

  /** The task, if it is this assistant's and the caller's `event` filter allows its thread. */
  const findTask = async (a: AssistantRecord, id: string, auth: AuthInfo | undefined, event: AuthEvent): Promise<TaskSource> => {
    const src = await loadTask(storage, id);
    if (!src || src.run.assistant_id !== a.assistant_id) throw taskNotFound(id);
    if (app.auth && auth) {
      const filter = await app.auth.authorize(auth, event, { thread_id: src.run.thread_id, run_id: src.run.run_id });
      if (!matchesAuthFilter(filter, (await storage.threads.get(src.run.thread_id))?.metadata)) throw taskNotFound(id);
    }
    return src;
  };

  const send = async (
    a: AssistantRecord,
    id: RpcId,
    d: Dialect,
    params: RpcParams,
    headers: Record<string, string>,
    auth: AuthInfo | undefined,
  ): Promise<Reply> => {
    const hist = historyOptions(params, headers, { includeArtifacts: true });
    const run = await createTaskRun(app, schemas, a, params, headers, false, auth);
    const answer = async (): Promise<string> => {
      const task = buildTask(d, (await loadTask(storage, run.run_id, run.thread_id)) ?? { run, thread: undefined, latest: true }, hist);
      return JSON.stringify(rpcResult(id, d === "v1" ? { task } : task));
    };
    const cfg = isRecord(params.configuration) ? params.configuration : {};
    if (cfg.blocking === false || cfg.returnImmediately === true) return { kind: "text", status: 200, contentType: "application/json", body: await answer() };
    const body = pool.runs.waitFor(run.run_id).then(answer, (err: unknown) => JSON.stringify(rpcError(id, toRpcError(err))));
    return { kind: "deferred", contentType: "application/json", heartbeatMs: 1_000, body };
  };

  const cancel = async (a: AssistantRecord, d: Dialect, params: RpcParams, headers: Record<string, string>, auth: AuthInfo | undefined) => {
    const hist = historyOptions(params, headers, { includeArtifacts: true });
    const src = await findTask(a, taskIdOf(params), auth, "threads:update");
    const state = taskState(src);
    if (state !== "submitted" && state !== "working") {
      throw new RpcError(A2A_ERRORS.TASK_NOT_CANCELABLE, `Task ${src.run.run_id} cannot be canceled: it is ${state}`);
    }
    await pool.request({ type: "run.cancel", threadId: src.run.thread_id, runId: src.run.run_id, action: "interrupt", wait: true });
    return buildTask(d, (await loadTask(storage, src.run.run_id, src.run.thread_id)) ?? src, hist);
  };

  const list = async (a: AssistantRecord, d: Dialect, params: RpcParams, headers: Record<string, string>, auth: AuthInfo | undefined) => {
    const hist = historyOptions(params, headers, { length: 0, includeArtifacts: false });
    const pageSize = params.pageSize ?? 50;
    if (!intWithin(pageSize, 1, 100)) throw new RpcError(RPC.INVALID_PARAMS, "Invalid params: pageSize must be between 1 and 100");
    const offset = params.pageToken === undefined || params.pageToken === "" ? 0 : Number(params.pageToken);
    if (!Number.isInteger(offset) || offset < 0) throw new RpcError(RPC.INVALID_PARAMS, "Invalid params: invalid pageToken");
    const ctx = canonicalUuidOf(params.contextId);
    if (params.contextId !== undefined && ctx === undefined) throw new RpcError(RPC.INVALID_PARAMS, "Invalid params: contextId must be a UUID");
    const wanted = typeof params.status === "string" ? parseState(params.status) : undefined;
    if (params.status !== undefined && !wanted) throw new RpcError(RPC.INVALID_PARAMS, `Invalid params: unknown task state ${String(params.status)}`);
    const filter = await app.auth?.authorize(auth, "threads:search", { thread_id: ctx, status: params.status, limit: pageSize, offset });
    const sources = new TaskSourceReader(storage);
    const found: TaskSource[] = [];
    for await (const value of storage.runs.ofAssistant(a.assistant_id, ctx)) {
      const src = await sources.withoutValues(value);
      if (filter && !(src.thread && matchesAuthFilter(filter, src.thread.metadata))) continue; // another user's task
      if (!wanted || taskState(src) === wanted) found.push(src);
    }
    found.sort((x, y) => (x.run.created_at === y.run.created_at ? (x.run.run_id < y.run.run_id ? 1 : -1) : x.run.created_at < y.run.created_at ? 1 : -1));
    const next = offset + pageSize < found.length ? String(offset + pageSize) : "";
    return {
      tasks: await Promise.all(found.slice(offset, offset + pageSize).map(async (s) => buildTask(d, await sources.withValues(s), hist))),
      nextPageToken: next,
      pageSize,
      totalSize: found.length,
    };
  };

  /**
   * A JSON-RPC notification (no `id`) gets no response (JSON-RPC 2.0 §4.1), only 202, as on /mcp:
   * a message starts its task without waiting, a cancel cancels; reads have nothing to do.
   */
  const notify = async (a: AssistantRecord, op: string, params: RpcParams, headers: Record<string, string>, auth: AuthInfo | undefined): Promise<Reply> => {
    try {
      if (op === "send" || op === "stream") await createTaskRun(app, schemas, a, params, headers, false, auth);
      else if (op === "cancel") await cancel(a, "v1", params, headers, auth);
    } catch {
      // nobody to tell: a notification's errors are not reported either
    }
    return empty(202);
  };

  const post = async (assistantId: string, body: Json, headers: Record<string, string>, auth: AuthInfo | undefined): Promise<Reply> => {
    if (Array.isArray(body)) return json(rpcError(null, { code: RPC.INVALID_REQUEST, message: "Invalid Request: batch requests are not supported" }), 400);
    const env = classify(body);
    if (env.kind === "invalid") return json(rpcError(env.id, env.error), 400);
    if (env.kind === "response") return json(rpcError(null, { code: RPC.INVALID_REQUEST, message: "Invalid Request: expected a request" }), 400);
    const id = env.kind === "request" ? env.id : null;
    const spec = METHODS[env.method];
    if (spec?.op === "stream") {
      if (!accepts(headers.accept, "text/event-stream")) return json({ error: `Not Acceptable: ${env.method} requires Accept: text/event-stream` }, 400);
    } else if (headers.accept !== undefined && !accepts(headers.accept, "application/json", "application/*", "*/*")) {
      return json({ error: "Not Acceptable: Client must accept application/json" }, 400);
    }
    if (!spec) return env.kind === "notification" ? empty(202) : json(rpcError(id, { code: RPC.METHOD_NOT_FOUND, message: `Method not found: ${env.method}` }));
    let a: AssistantRecord;
    try {
      a = await assistantFor(assistantId, auth);
    } catch (err) {
      // a handler's own denial (403, HTTPException) keeps its status
      if (!(err instanceof TroupeError) || err.code !== "NOT_FOUND") throw err;
      return json(rpcError(id, { code: RPC.INVALID_PARAMS, message: `Assistant not found: ${assistantId}` }), 404);
    }
    const p = env.params;
    const d = spec.dialect;
    if (env.kind === "notification") return notify(a, spec.op, p, headers, auth);
    try {
      switch (spec.op) {
        case "send":
          return await send(a, id, d, p, headers, auth);
        case "stream": {
          const history = historyOptions(p, headers, { includeArtifacts: true });
          const run = await createTaskRun(app, schemas, a, p, headers, true, auth);
          return taskStream({ storage, runs: pool.runs, run, thread: await viewOf(storage, run.thread_id), dialect: d, rpcId: id, history });
        }
        case "get": {
          const hist = historyOptions(p, headers, { includeArtifacts: true });
          return json(rpcResult(id, buildTask(d, await findTask(a, taskIdOf(p), auth, "threads:read"), hist)));
        }
        case "cancel":
          return json(rpcResult(id, await cancel(a, d, p, headers, auth)));
        case "list":
          return json(rpcResult(id, await list(a, d, p, headers, auth)));
        case "card":
          return json(rpcResult(id, await card(a, headers)));
      }
    } catch (err) {
      return json(rpcError(id, toRpcError(err)));
    }
  };

  return [
    route({
      method: "POST",
      path: "/a2a/:assistant_id",
      operationId: "a2a_post",
      summary: "A2A JSON-RPC request (v1.0 and v0.3 method names)",
      tag: TAG,
      // any JSON: classified by src/api/jsonrpc.ts, which answers a malformed message
      body: anyValue,
      bodyOptional: true,
      handler: ({ params, body, headers, auth }) => post(params.assistant_id, body, headers, auth),
    }),
    {
      method: "GET",
      path: "/a2a/:assistant_id/.well-known/agent-card.json",
      operationId: "a2a_agent_card",
      summary: "A2A agent card of an assistant",
      tag: TAG,
      handler: async ({ params, headers, auth }) => json(await card(await assistantFor(params.assistant_id, auth), headers)),
    },
    route({
      method: "GET",
      path: "/.well-known/agent-card.json",
      operationId: "a2a_agent_card_by_query",
      summary: "A2A agent card (assistant_id query parameter)",
      tag: TAG,
      query: body({ assistant_id: keyString }),
      handler: async ({ query, headers, auth }) => {
        const id = query.assistant_id;
        if (!id) return json(rpcError(null, { code: RPC.INVALID_PARAMS, message: "Missing required query parameter: assistant_id" }), 400);
        return json(await card(await assistantFor(id, auth), headers));
      },
    }),
  ];
}
