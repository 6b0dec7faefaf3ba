// Executes one run of a LangGraph graph and turns its stream into wire events
// (names and payloads per reference §7.3). Pure w.r.t. storage: the actor persists the outcome.
import { debugChunk, taskPayload } from "./debug-payloads.ts";
import type { RunRecord, StreamMode } from "../storage/records.ts";
import { EXECUTION_KEY } from "../storage/checkpoints/checkpoint-config.ts";
import type { CompiledGraphLike, LangGraphLib } from "./graph-registry.ts";
import type { DeferredEventData } from "./event-gate.ts";
import type { JsonSegments } from "../bridge/json-segments.ts";
import { deferredJsonText, errorInfo, toJsonSegments, toJsonText } from "./value-json.ts";

export type EmitFn = (event: string, dataJson: string | DeferredEventData) => void;

export interface RunOutcome {
  status: "success" | "error" | "interrupted";
  /** set when the abort reason was a cancel with rollback */
  rolledBack: boolean;
  error?: { error: string; message: string };
  /** JSON of the last root values chunk (the /wait body), if any, as segments (json-segments.ts) */
  lastValues?: JsonSegments;
  /** the last root values chunk was LangGraph's `{__interrupt__: [...]}`, not the state */
  lastValuesInterrupt?: boolean;
}

/** LangGraph's values chunk for an interrupted run: `{__interrupt__: [...]}` in place of the state. */
function isInterruptChunk(payload: unknown): boolean {
  return typeof payload === "object" && payload !== null && Object.hasOwn(payload, "__interrupt__");
}

export interface ExecuteOptions {
  run: RunRecord;
  graph: CompiledGraphLike;
  lib: LangGraphLib;
  signal: AbortSignal;
  emit: EmitFn;
  /** a run started before its create committed: names this execution to its checkpoint writes (EXECUTION_KEY) */
  execution?: string;
}

const LIB_MODE: Record<StreamMode, string[]> = {
  values: ["values"],
  updates: ["updates"],
  "messages-tuple": ["messages"],
  messages: ["messages", "values"],
  custom: ["custom"],
  debug: ["debug"],
  tasks: ["tasks"],
  checkpoints: ["checkpoints"],
  tools: ["tools"],
  events: [],
};

export function buildInput(run: RunRecord, lib: LangGraphLib): unknown {
  const cmd = run.kwargs.command;
  if (cmd && typeof cmd === "object") {
    const args: Record<string, unknown> = {};
    if ("resume" in cmd) args.resume = cmd.resume;
    if ("update" in cmd && cmd.update != null) args.update = cmd.update;
    if ("goto" in cmd && cmd.goto != null) {
      const toSend = (g: unknown): unknown =>
        g && typeof g === "object" && "node" in (g as object) ? new lib.Send((g as { node: string }).node, (g as { input?: unknown }).input) : g;
      args.goto = Array.isArray(cmd.goto) ? cmd.goto.map(toSend) : toSend(cmd.goto);
    }
    return new lib.Command(args);
  }
  return run.kwargs.input ?? null;
}

export function buildRunConfig(run: RunRecord, signal: AbortSignal, checkpointing = true, execution?: string): Record<string, unknown> {
  const cfg = run.kwargs.config ?? {};
  const { configurable = {}, tags, recursion_limit, ...rest } = cfg;
  delete (rest as Record<string, unknown>).metadata;
  const out: Record<string, unknown> = {
    ...rest,
    configurable: { ...configurable, ...(execution === undefined ? {} : { [EXECUTION_KEY]: execution }) },
    metadata: {
      ...run.metadata,
      graph_id: run.graph_id,
      assistant_id: run.assistant_id,
      run_id: run.run_id,
      thread_id: run.thread_id,
      ...(run.kwargs.config.metadata as Record<string, unknown> | undefined),
    },
    signal,
    runId: run.run_id,
  };
  if (!checkpointing) delete (out.configurable as Record<string, unknown>).thread_id;
  if (tags) out.tags = tags;
  if (recursion_limit !== undefined) out.recursionLimit = recursion_limit;
  if (run.kwargs.interrupt_before !== undefined) out.interruptBefore = run.kwargs.interrupt_before;
  if (run.kwargs.interrupt_after !== undefined) out.interruptAfter = run.kwargs.interrupt_after;
  if (run.kwargs.context !== undefined && run.kwargs.context !== null) out.context = run.kwargs.context;
  if (run.kwargs.durability) out.durability = run.kwargs.durability;
  return out;
}

interface MessageChunkLike {
  id?: string;
  concat?(other: unknown): MessageChunkLike;
}

export async function executeRun(o: ExecuteOptions): Promise<RunOutcome> {
  const { run, graph, emit, signal } = o;
  const requested = new Set<StreamMode>(run.kwargs.stream_mode.length ? run.kwargs.stream_mode : ["values"]);
  const libModes = new Set<string>(["values"]);
  for (const m of requested) for (const lm of LIB_MODE[m] ?? []) libModes.add(lm);
  const subgraphs = run.kwargs.subgraphs;
  const wantEvents = requested.has("events");
  const checkpointing = !(run.kwargs.temporary && run.on_completion !== "keep");

  // The last root values chunk is the /wait body and the thread's new values: serialized once at
  // the end, as segments (the values mode's text for the stream is one string; see json-segments.ts).
  let lastValues: { payload: unknown } | undefined;
  const finalValues = (): JsonSegments | undefined => (lastValues ? toJsonSegments(lastValues.payload) : undefined);
  // Asked of the payload, not of the JSON: reading a long thread's values text would make V8
  // flatten it, one large-object allocation per run (see the note on thread values in ThreadActor.finish).
  const lastValuesInterrupt = (): boolean => isInterruptChunk(lastValues?.payload);
  const seenMessageIds = new Set<string>();
  const partials = new Map<string, MessageChunkLike>();

  const handleChunk = (ns: string[], mode: string, payload: unknown): void => {
    const suffix = ns.length ? `|${ns.join("|")}` : "";
    switch (mode) {
      case "values": {
        if (ns.length === 0) lastValues = { payload };
        if (requested.has("values")) emit(`values${suffix}`, deferredJsonText(payload));
        if (requested.has("messages")) {
          const msgs = (payload as { messages?: unknown } | null)?.messages;
          if (Array.isArray(msgs)) {
            const fresh = msgs.filter((m) => {
              const id = (m as { id?: string } | null)?.id;
              if (!id || seenMessageIds.has(id)) return false;
              seenMessageIds.add(id);
              return true;
            });
            if (fresh.length) emit(`messages/complete${suffix}`, toJsonText(fresh));
          }
        }
        return;
      }
      case "messages": {
        if (requested.has("messages-tuple")) emit(`messages${suffix}`, toJsonText(payload));
        if (requested.has("messages")) {
          const [chunk, metadata] = payload as [MessageChunkLike, unknown];
          const id = chunk?.id;
          if (!id) return;
          const tags = (metadata as { tags?: string[] } | null)?.tags;
          if (tags?.includes("nostream")) return;
          const prev = partials.get(id);
          if (!prev) emit(`messages/metadata${suffix}`, toJsonText({ [id]: { metadata } }));
          const acc = prev?.concat ? prev.concat(chunk) : chunk;
          partials.set(id, acc);
          emit(`messages/partial${suffix}`, toJsonText([acc]));
        }
        return;
      }
      case "checkpoints": {
        if (!requested.has("checkpoints")) return;
        const p = payload as { values?: unknown; metadata?: unknown; next?: unknown };
        emit(`checkpoints${suffix}`, toJsonText({ values: p.values, metadata: p.metadata, next: p.next }));
        return;
      }
      case "debug":
        if (requested.has("debug")) emit(`debug${suffix}`, toJsonText(debugChunk(payload)));
        return;
      case "tasks":
        if (requested.has("tasks")) emit(`tasks${suffix}`, toJsonText(taskPayload(payload)));
        return;
      default:
        if (requested.has(mode as StreamMode)) emit(`${mode}${suffix}`, toJsonText(payload));
    }
  };

  const config = buildRunConfig(run, signal, checkpointing, o.execution);
  const options: Record<string, unknown> = { ...config, streamMode: [...libModes], subgraphs };
  try {
    const input = buildInput(run, o.lib);
    if (wantEvents) {
      for await (const ev of graph.streamEvents(input, { ...options, version: "v2" })) {
        if (ev.event === "on_chain_stream" && ev.run_id === run.run_id) {
          const chunk = ev.data.chunk as unknown[];
          const [ns, mode, payload] = subgraphs ? (chunk as [string[], string, unknown]) : ([[], ...chunk] as unknown as [string[], string, unknown]);
          handleChunk(ns, mode, payload);
        } else if (!ev.tags?.includes("langsmith:hidden")) {
          // LangGraph's own plumbing (e.g. the __start__ node), which upstream does not send either
          emit("events", toJsonText(ev));
        }
      }
    } else {
      for await (const chunk of await graph.stream(input, options)) {
        const c = chunk as unknown[];
        if (subgraphs) handleChunk(c[0] as string[], c[1] as string, c[2]);
        else handleChunk([], c[0] as string, c[1]);
      }
    }
    return { status: "success", rolledBack: false, lastValues: finalValues(), lastValuesInterrupt: lastValuesInterrupt() };
  } catch (err) {
    if (signal.aborted) {
      return { status: "interrupted", rolledBack: signal.reason === "rollback", lastValues: finalValues(), lastValuesInterrupt: lastValuesInterrupt() };
    }
    const error = errorInfo(err);
    emit("error", toJsonText(error));
    return { status: "error", rolledBack: false, error, lastValues: finalValues(), lastValuesInterrupt: lastValuesInterrupt() };
  }
}
