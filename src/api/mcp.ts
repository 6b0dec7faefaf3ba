// MCP endpoint (reference §4.2): Streamable HTTP transport, stateless, JSON responses only.
// Every assistant is one tool; tools/call runs the assistant as a stateless run and waits.
// Under custom auth a caller's tools are the assistants it may run: the graphs' default assistants
// and those its `assistants:search` filter allows; tools/call is a run like any other
// (assistants:read, threads:create_run, the auth user in configurable).
import { isServerDefault, matchesAuthFilter } from "../auth/index.ts";
import { json, route, type AuthInfo, type Reply, type RouteDef } from "../http/types.ts";
import { anyValue } from "../http/schemas/common.ts";
import type { AppContext } from "../server/context.ts";
import type { AssistantRecord, Json, JsonObject } from "../storage/records.ts";
import { jsonText } from "../bridge/json-segments.ts";
import { uuid7 } from "../util/ids.ts";
import { inputSchemas } from "./graph-input-schema.ts";
import { accepts, classify, isRecord, RPC, RpcError, rpcError, rpcResult, toRpcError, type RpcParams, type RpcResponse } from "./jsonrpc.ts";
import { buildCreateRun, createBuiltRun, type RunCreateBody } from "./run-request.ts";

const TAG = "mcp";
const PROTOCOL_VERSION = "2024-11-05";
const PAGE_SIZE = 100;

/** MCP tool names: letters, digits, `_` and `-`, at most 64 characters (what LLM tool APIs accept). */
export function toolName(assistantName: string): string {
  const s = assistantName.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 64);
  return s === "" ? "assistant" : s;
}

export function mcpRoutes(app: AppContext): RouteDef[] {
  const schemas = inputSchemas(app);
  const graphDescription = new Map(app.config.graphs.map((g) => [g.graphId, g.description]));

  /** Assistants of registered graphs the caller may run, oldest first (a stable order for cursor paging). */
  const assistants = async (auth: AuthInfo | undefined): Promise<AssistantRecord[]> => {
    const filter = await app.auth?.authorize(auth, "assistants:search", { graph_id: undefined, metadata: undefined, limit: 0, offset: 0 });
    const out: AssistantRecord[] = [];
    const all = await app.storage.assistants.search({ sortBy: "created_at", order: "asc", offset: 0, limit: Number.MAX_SAFE_INTEGER });
    for (const value of all.items) {
      if (app.graphIds.has(value.graph_id) && (isServerDefault(value) || matchesAuthFilter(filter, value.metadata))) out.push(value);
    }
    return out.sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.assistant_id < b.assistant_id ? -1 : 1));
  };

  const tool = async (a: AssistantRecord) => {
    const schema = await schemas.of(a);
    return {
      name: toolName(a.name),
      description: a.description ?? graphDescription.get(a.graph_id) ?? "",
      inputSchema: schema && schema.type === "object" ? schema : { type: "object" },
    };
  };

  const listTools = async (params: RpcParams, auth: AuthInfo | undefined) => {
    const c = params.cursor;
    const offset = c === undefined || c === null ? 0 : Number(c);
    if (!Number.isInteger(offset) || offset < 0) throw new RpcError(RPC.INVALID_PARAMS, `Invalid cursor: ${String(c)}`);
    const all = await assistants(auth);
    const tools = await Promise.all(all.slice(offset, offset + PAGE_SIZE).map(tool));
    return { tools, ...(offset + PAGE_SIZE < all.length ? { nextCursor: String(offset + PAGE_SIZE) } : {}) };
  };

  const callTool = async (params: RpcParams, headers: Record<string, string>, auth: AuthInfo | undefined) => {
    const name = params.name;
    if (typeof name !== "string" || name === "") throw new RpcError(RPC.INVALID_PARAMS, "Invalid params: tool name is required");
    const args = params.arguments ?? {};
    if (!isRecord(args)) throw new RpcError(RPC.INVALID_PARAMS, "Invalid params: arguments must be an object");
    const matches = (await assistants(auth)).filter((a) => toolName(a.name) === name);
    if (matches.length === 0) throw new RpcError(RPC.INVALID_PARAMS, `Unknown tool: ${name}`);
    if (matches.length > 1) {
      throw new RpcError(RPC.INVALID_PARAMS, `Tool name ${name} is ambiguous: it matches assistants ${matches.map((a) => a.assistant_id).join(", ")}`);
    }
    const body: RunCreateBody = { assistant_id: matches[0].assistant_id, input: args as JsonObject };
    if (params.context !== undefined) body.context = params.context as JsonObject;
    const ids = { threadId: uuid7(), runId: uuid7() };
    const run = await createBuiltRun(app, async (freshAssistant) => {
      const cmd = await buildCreateRun(app, body, headers, { ...ids, stateless: true, observed: false, outputAwaited: true, auth, freshAssistant });
      await app.auth?.authorizeRun(auth, cmd, (tid) => app.storage.threads.get(tid));
      return cmd;
    });
    const output = await app.pool.runOutput(await app.pool.runs.waitFor(run.run_id));
    const text = output === undefined ? "null" : jsonText(output);
    const out = JSON.parse(text) as unknown;
    if (isRecord(out) && isRecord(out.__error__)) {
      const e = out.__error__;
      return { content: [{ type: "text", text: `${String(e.error ?? "Error")}: ${String(e.message ?? "")}` }], isError: true };
    }
    return { content: [{ type: "text", text }], isError: false };
  };

  const call = (method: string, params: RpcParams, headers: Record<string, string>, auth: AuthInfo | undefined): Promise<unknown> | unknown => {
    switch (method) {
      case "initialize":
        return { protocolVersion: PROTOCOL_VERSION, capabilities: { tools: { listChanged: false } }, serverInfo: { name: "LangGraph", version: app.version } };
      case "ping":
        return {};
      case "tools/list":
        return listTools(params, auth);
      case "tools/call":
        return callTool(params, headers, auth);
      default:
        throw new RpcError(RPC.METHOD_NOT_FOUND, `Method not found: ${method}`);
    }
  };

  /** Answer one message; undefined for notifications and responses (nothing to send back). */
  const answer = async (msg: unknown, headers: Record<string, string>, auth: AuthInfo | undefined): Promise<{ response?: RpcResponse; invalid: boolean }> => {
    const env = classify(msg);
    if (env.kind === "invalid") return { response: rpcError(env.id, env.error), invalid: true };
    if (env.kind !== "request") return { invalid: false };
    try {
      return { response: rpcResult(env.id, await call(env.method, env.params, headers, auth)), invalid: false };
    } catch (err) {
      return { response: rpcError(env.id, toRpcError(err)), invalid: false };
    }
  };

  const post = async (body: Json, headers: Record<string, string>, auth: AuthInfo | undefined): Promise<Reply> => {
    if (!accepts(headers.accept, "application/json", "text/event-stream")) {
      return json({ error: "Not Acceptable: Client must accept application/json or text/event-stream" }, 400);
    }
    if (Array.isArray(body)) {
      if (body.length === 0) return json(rpcError(null, { code: RPC.INVALID_REQUEST, message: "Invalid Request: empty batch" }), 400);
      const answers = await Promise.all(body.map((m) => answer(m, headers, auth)));
      const responses = answers.flatMap((a) => (a.response ? [a.response] : []));
      return responses.length ? json(responses) : { kind: "empty", status: 202 };
    }
    const a = await answer(body, headers, auth);
    if (!a.response) return { kind: "empty", status: 202 };
    return json(a.response, a.invalid ? 400 : 200);
  };

  return [
    route({
      method: "POST",
      path: "/mcp",
      operationId: "mcp_post",
      summary: "MCP JSON-RPC request (Streamable HTTP, stateless)",
      tag: TAG,
      // one message or a batch: classified by src/api/jsonrpc.ts, which answers a malformed one
      body: anyValue,
      bodyOptional: true,
      handler: ({ body, headers, auth }) => post(body, headers, auth),
    }),
    {
      method: "DELETE",
      path: "/mcp",
      operationId: "mcp_delete",
      summary: "MCP session termination (not supported: sessions do not exist)",
      tag: TAG,
      handler: () => json({ error: "Session termination is not supported: this MCP server is stateless" }, 404),
    },
  ];
}
