// Commands of the thread-centric protocol (reference §13, docs/THREAD_PROTOCOL.md), shared by
// POST /threads/{t}/commands and the WebSocket at /threads/{t}/stream/events. Each command
// answers a protocol envelope: {type: "success", id, result, meta} or {type: "error", id, error,
// message}. Runs are created through the same path as POST /threads/{t}/runs, flagged
// `protocol` so their worker streams protocol events into the thread's session.
import { TroupeError, type ErrorCode } from "../../errors.ts";
import { matchesAuthFilter } from "../../auth/index.ts";
import type { AuthInfo } from "../../http/types.ts";
import type { AppContext } from "../../server/context.ts";
import type { Json, JsonObject, MultitaskStrategy, RunnableConfigJson, ThreadRecord } from "../../storage/records.ts";
import { uuid7 } from "../../util/ids.ts";
import { buildCreateRun, createBuiltRun, type RunCreateBody } from "../run-request.ts";
import { compileBody, type Validator } from "../../http/validation.ts";
import { COMMAND_PARAMS } from "./schemas.ts";

export type ProtocolErrorCode =
  | "invalid_argument"
  | "unknown_command"
  | "unknown_error"
  | "no_such_run"
  | "no_such_subscription"
  | "no_such_namespace"
  | "no_such_interrupt"
  | "no_such_checkpoint"
  | "permission_denied"
  | "not_supported";

export interface ProtocolCommand {
  id: number;
  method: string;
  params?: Record<string, unknown>;
}

export interface ProtocolMeta {
  thread_id: string;
  applied_through_seq?: number;
}

export type ProtocolResponse =
  | { type: "success"; id: number; result: unknown; meta: ProtocolMeta }
  | { type: "error"; id: number | null; error: ProtocolErrorCode; message: string; meta?: ProtocolMeta };

/** A command that cannot be carried out, with its protocol error code. */
export class ProtocolCommandError extends Error {
  constructor(
    readonly code: ProtocolErrorCode,
    message: string,
  ) {
    super(message);
  }
}

const invalid = (message: string) => new ProtocolCommandError("invalid_argument", message);

/** Our domain errors as protocol error codes (the HTTP status map's counterpart). */
const DOMAIN_TO_PROTOCOL: Partial<Record<ErrorCode, ProtocolErrorCode>> = {
  NOT_FOUND: "invalid_argument",
  GRAPH_NOT_FOUND: "invalid_argument",
  CONFLICT: "invalid_argument",
  THREAD_BUSY: "invalid_argument",
  MULTITASK_REJECTED: "invalid_argument",
  VALIDATION: "invalid_argument",
  BAD_REQUEST: "invalid_argument",
  UNAUTHORIZED: "permission_denied",
  FORBIDDEN: "permission_denied",
  NOT_IMPLEMENTED: "not_supported",
};

export interface CommandContext {
  threadId: string;
  headers: Record<string, string>;
  auth?: AuthInfo;
}

/** Params of the run-creating commands that pass through to the run as they are. */
interface RunParams {
  config?: RunnableConfigJson;
  metadata?: JsonObject;
  multitask_strategy?: MultitaskStrategy;
  langsmith_tracer?: { project_name?: string; example_id?: string };
}

const paramValidators = new Map<string, Validator>(Object.entries(COMMAND_PARAMS).map(([method, schema]) => [method, compileBody(schema, "params")]));

/** Checks a command's params against its schema (thread-schemas.ts); an invalid_argument names every problem. */
export function checkParams(method: string, params: Record<string, unknown>): void {
  const issues = paramValidators.get(method)?.(params);
  if (issues?.length) throw invalid(issues.map((i) => `${i.loc.join(".")}: ${i.msg}`).join("; "));
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The run options of run.start / input.respond / state.fork (already checked by their schema). */
function runParams(params: Record<string, unknown>): RunParams {
  const strategy = (params.multitask_strategy ?? params.multitaskStrategy ?? undefined) as MultitaskStrategy | undefined;
  return {
    ...(params.config ? { config: params.config as RunnableConfigJson } : {}),
    ...(params.metadata ? { metadata: params.metadata as JsonObject } : {}),
    ...(strategy ? { multitask_strategy: strategy } : {}),
    ...(params.langsmith_tracer ? { langsmith_tracer: params.langsmith_tracer as RunParams["langsmith_tracer"] } : {}),
  };
}

export class ThreadCommands {
  constructor(private readonly app: AppContext) {}

  /** Runs one command; never throws (failures are error envelopes). */
  async execute(cmd: ProtocolCommand, ctx: CommandContext): Promise<ProtocolResponse> {
    try {
      const result = await this.dispatch(cmd, ctx);
      return { type: "success", id: cmd.id, result, meta: this.meta(ctx.threadId) };
    } catch (err) {
      const { code, message } = toProtocolError(err);
      return { type: "error", id: cmd.id, error: code, message, meta: this.meta(ctx.threadId) };
    }
  }

  private meta(threadId: string): ProtocolMeta {
    const seq = this.app.pool.sessions.lastSeq(threadId);
    return seq === undefined ? { thread_id: threadId } : { thread_id: threadId, applied_through_seq: seq };
  }

  private dispatch(cmd: ProtocolCommand, ctx: CommandContext): Promise<unknown> {
    const params = cmd.params ?? {};
    checkParams(cmd.method, params);
    switch (cmd.method) {
      case "run.start":
        return this.runStart(params, ctx);
      case "input.respond":
        return this.inputRespond(params, ctx);
      case "state.get":
        return this.stateGet(params, ctx);
      case "state.listCheckpoints":
        return this.listCheckpoints(params, ctx);
      case "state.fork":
        return this.fork(params, ctx);
      case "agent.getTree":
        return this.agentTree(params, ctx);
      case "subscription.subscribe":
      case "subscription.unsubscribe":
        throw new ProtocolCommandError(
          "not_supported",
          `${cmd.method} is a WebSocket command: over HTTP, each POST /threads/{thread_id}/stream/events is one subscription`,
        );
      case "subscription.reconnect":
        throw new ProtocolCommandError(
          "not_supported",
          "subscription.reconnect is not supported: subscribe again (events are replayed from the thread's buffer)",
        );
      case "input.inject":
        throw new ProtocolCommandError(
          "not_supported",
          "input.inject is not supported: a running graph cannot take input; start a run or respond to an interrupt",
        );
      default:
        throw new ProtocolCommandError("unknown_command", `Unknown command "${cmd.method}"`);
    }
  }

  /** The thread, readable by this identity, or an error naming it. */
  private async readableThread(ctx: CommandContext): Promise<ThreadRecord> {
    const filter = await this.app.auth?.authorize(ctx.auth, "threads:read", { thread_id: ctx.threadId });
    const t = await this.app.storage.threads.get(ctx.threadId);
    if (!t || !matchesAuthFilter(filter, t.metadata)) throw invalid(`Thread ${ctx.threadId} not found`);
    return t;
  }

  /** Creates a protocol run on the thread and makes it the thread's session. */
  private async createRun(
    ctx: CommandContext,
    body: RunCreateBody,
    opts: { ifNotExists: boolean; requireBoundAssistant?: boolean; runId?: string },
  ): Promise<string> {
    const runId = opts.runId ?? uuid7();
    const run = await createBuiltRun(this.app, async (freshAssistant) => {
      const cmd = await buildCreateRun(this.app, { ...body, if_not_exists: opts.ifNotExists ? "create" : "reject" }, ctx.headers, {
        threadId: ctx.threadId,
        runId,
        stateless: false,
        auth: ctx.auth,
        observed: true,
        freshAssistant,
      });
      cmd.kwargs.protocol = true;
      cmd.kwargs.stream_mode = [];
      cmd.observed = true;
      cmd.requireBoundAssistant = opts.requireBoundAssistant;
      await this.app.auth?.authorizeRun(ctx.auth, cmd, (id) => this.app.storage.threads.get(id));
      return cmd;
    });
    this.app.pool.sessions.adopt(ctx.threadId, run.run_id);
    return run.run_id;
  }

  /** The assistant a thread is bound to: the one its first run used (thread metadata). */
  private boundAssistant(t: ThreadRecord | undefined): string | undefined {
    const a = t?.metadata.assistant_id;
    return typeof a === "string" ? a : undefined;
  }

  private async runStart(params: Record<string, unknown>, ctx: CommandContext): Promise<{ run_id: string }> {
    const assistantId = params.assistant_id as string;
    // the thread's binding to its first run's assistant is checked by its actor (requireBoundAssistant)
    const command = serializedCommand(params.input);
    const input = command ? { command } : { input: (params.input ?? null) as Json };
    const runId = await this.createRun(ctx, { assistant_id: assistantId, ...input, ...runParams(params) }, { ifNotExists: true, requireBoundAssistant: true });
    return { run_id: runId };
  }

  private async inputRespond(params: Record<string, unknown>, ctx: CommandContext): Promise<Record<string, never>> {
    const t = await this.readableThread(ctx);
    if (params.interrupt_id === undefined && params.responses === undefined)
      throw invalid("params: give interrupt_id (with response) or responses: [{interrupt_id, response}]");
    const entries = (params.responses as { interrupt_id: string; response?: unknown }[] | undefined) ?? [
      { interrupt_id: params.interrupt_id as string, response: params.response },
    ];
    if (t.status !== "interrupted") throw invalid(`Thread ${ctx.threadId} is not interrupted (status ${t.status}): nothing to respond to`);
    const pending = new Set(
      Object.values(t.interrupts ?? {})
        .flat()
        .map((i) => (i as { id?: string }).id)
        .filter((id): id is string => typeof id === "string"),
    );
    const resume: Record<string, Json> = {};
    for (const e of entries) {
      if (!pending.has(e.interrupt_id))
        throw new ProtocolCommandError("no_such_interrupt", `Interrupt ${e.interrupt_id} is not pending on thread ${ctx.threadId}`);
      resume[e.interrupt_id] = (e.response ?? null) as Json;
    }
    const assistantId = this.boundAssistant(t) ?? (typeof t.metadata.graph_id === "string" ? t.metadata.graph_id : undefined);
    if (!assistantId) throw invalid(`Thread ${ctx.threadId} has no assistant to resume with`);
    const command: JsonObject = { resume };
    // reject by default: a second answer to the same interrupts (another tab, a retry) racing this
    // one must fail, not queue a resume against an interrupt that is already answered
    const rp: RunParams = { multitask_strategy: "reject", ...runParams(params) };
    if (params.strict_resume === true) {
      // LangGraph refuses a resume that matches no pending interrupt instead of ignoring it
      rp.config = { ...(rp.config ?? {}), configurable: { ...(rp.config?.configurable ?? {}), __pregel_strict_resume: true } };
    }
    const update = params.update;
    if (update !== undefined && update !== null) command.update = update as Json;
    if (params.goto !== undefined && params.goto !== null) command.goto = params.goto as Json;
    // every client of the thread can stop offering these interrupts: said first in the resume run's
    // session, before its events (its start can reach the hub before its create reply does)
    const runId = uuid7();
    const answered = this.app.pool.sessions.announceWhenAdopted(runId, "input.answered", "input", { interrupt_ids: Object.keys(resume) });
    try {
      await this.createRun(ctx, { assistant_id: assistantId, command, ...rp }, { ifNotExists: false, runId });
    } finally {
      // adopted by now if the run was created (then a no-op); otherwise, or if a newer run holds
      // the session so it never will be, the opener must not stay behind
      answered.cancel();
    }
    return {};
  }

  private async stateGet(params: Record<string, unknown>, ctx: CommandContext): Promise<{ values: unknown; checkpoint?: { id: string; ns: string } }> {
    const t = await this.readableThread(ctx);
    if ((params.namespace as string[] | undefined)?.length)
      throw new ProtocolCommandError("no_such_namespace", "state.get reads the root graph's state only (namespace [])");
    const keys = params.keys as string[] | undefined;
    const state = await this.app.pool.request({ type: "thread.state", threadId: ctx.threadId, subgraphs: false, assistant: await this.graphAssistant(t) });
    let values = state.values as unknown;
    if (keys && isObject(values)) values = Object.fromEntries(Object.entries(values).filter(([k]) => keys.includes(k)));
    const cp = state.checkpoint as { checkpoint_id?: string; checkpoint_ns?: string } | null | undefined;
    return cp?.checkpoint_id ? { values, checkpoint: { id: cp.checkpoint_id, ns: cp.checkpoint_ns ?? "" } } : { values };
  }

  private async listCheckpoints(params: Record<string, unknown>, ctx: CommandContext): Promise<{ checkpoints: unknown[] }> {
    const t = await this.readableThread(ctx);
    if ((params.namespace as string[] | undefined)?.length)
      throw new ProtocolCommandError("no_such_namespace", "state.listCheckpoints lists the root graph's checkpoints only (namespace [])");
    const limit = (params.limit as number | undefined) ?? 10;
    const before = params.before as string | undefined;
    const states = await this.app.pool.request({ type: "thread.history", threadId: ctx.threadId, limit, before, assistant: await this.graphAssistant(t) });
    return {
      checkpoints: states.map((s) => {
        const meta = (s.metadata ?? {}) as JsonObject;
        const writes = meta.writes;
        const node = isObject(writes) ? Object.keys(writes)[0] : undefined;
        return {
          id: (s.checkpoint as JsonObject).checkpoint_id,
          timestamp: s.created_at,
          step: typeof meta.step === "number" ? meta.step : 0,
          ...(node ? { node_name: node } : {}),
          metadata: meta,
        };
      }),
    };
  }

  private async fork(params: Record<string, unknown>, ctx: CommandContext): Promise<{ run_id: string; thread_id: string }> {
    const t = await this.readableThread(ctx);
    const checkpointId = params.checkpoint_id as string;
    const assistantId = this.boundAssistant(t) ?? (typeof t.metadata.graph_id === "string" ? t.metadata.graph_id : undefined);
    if (!assistantId) throw invalid(`Thread ${ctx.threadId} has no assistant to run with`);
    const rp = runParams(params);
    const config: RunnableConfigJson = { ...(rp.config ?? {}), configurable: { ...(rp.config?.configurable ?? {}), checkpoint_id: checkpointId } };
    const runId = await this.createRun(ctx, { assistant_id: assistantId, input: (params.input ?? null) as Json, ...rp, config }, { ifNotExists: false });
    return { run_id: runId, thread_id: ctx.threadId };
  }

  private async agentTree(params: Record<string, unknown>, ctx: CommandContext): Promise<{ tree: unknown }> {
    const t = await this.readableThread(ctx);
    const runId = params.run_id;
    const hub = this.app.pool.sessions;
    if (runId !== undefined && runId !== hub.sessionRun(ctx.threadId))
      throw new ProtocolCommandError("no_such_run", `Run ${String(runId)} is not the thread's current protocol run`);
    const tree = hub.tree(ctx.threadId);
    if (tree) return { tree };
    const graphName = typeof t.metadata.graph_id === "string" ? t.metadata.graph_id : "root";
    const status = t.status === "busy" ? "running" : t.status === "error" ? "failed" : t.status === "interrupted" ? "interrupted" : "completed";
    return { tree: { namespace: [], status, graph_name: graphName } };
  }

  private graphAssistant(t: ThreadRecord) {
    const g = t.metadata.graph_id;
    return typeof g === "string" && this.app.graphIds.has(g) ? this.app.resolveAssistant(g) : undefined;
  }
}

/**
 * RemoteGraph.streamEvents v3 sends a Command as its input, serialized by Command.toJSON():
 * `{lg_name: "Command", resume, update, goto}` with Sends as `{lg_name: "Send", node, args}`.
 * Returns the run's `command` for such an input, undefined for any other input.
 */
export function serializedCommand(input: unknown): JsonObject | undefined {
  if (!isObject(input) || input.lg_name !== "Command") return undefined;
  const send = (g: unknown): Json => (isObject(g) && g.lg_name === "Send" ? { node: g.node as Json, input: (g.args ?? null) as Json } : (g as Json));
  const command: JsonObject = {};
  if (input.resume !== undefined && input.resume !== null) command.resume = input.resume as Json;
  if (input.update !== undefined && input.update !== null) command.update = input.update as Json;
  if (input.goto !== undefined && input.goto !== null) command.goto = Array.isArray(input.goto) ? input.goto.map(send) : send(input.goto);
  return command;
}

function toProtocolError(err: unknown): { code: ProtocolErrorCode; message: string } {
  if (err instanceof ProtocolCommandError) return { code: err.code, message: err.message };
  if (err instanceof TroupeError) {
    if (err.code === "VALIDATION" && err.issues?.length) {
      return { code: "invalid_argument", message: err.issues.map((i) => `${i.loc.join(".")}: ${i.msg}`).join("; ") };
    }
    return { code: DOMAIN_TO_PROTOCOL[err.code] ?? "unknown_error", message: err.message };
  }
  return { code: "unknown_error", message: err instanceof Error ? err.message : String(err) };
}
