// Executes a run started through the thread-centric protocol (POST /threads/{t}/commands
// run.start / input.respond / state.fork; docs/THREAD_PROTOCOL.md). LangGraph itself turns the
// graph's stream into protocol events (`streamEvents(..., {version: "v3"})`: lifecycle, values,
// updates, messages as content blocks, tools, custom, tasks, checkpoint envelopes); this adds
// what belongs to the server: interrupts become `input.requested` events and the root lifecycle
// ends `interrupted`, and events go out with their method, channel and namespace in the event name
// so the HTTP thread can filter and number them without parsing them.
import type { JsonSegments } from "../bridge/json-segments.ts";
import { buildInput, buildRunConfig, type ExecuteOptions, type RunOutcome } from "./run-executor.ts";
import { errorInfo, toJsonSegments, toJsonText } from "./value-json.ts";
import type { EmitFn } from "./run-executor.ts";

/** One event as LangGraph's GraphRunStream yields it (its `seq` is replaced by the thread's). */
export interface ProtocolEventLike {
  method: string;
  params: { namespace: string[]; timestamp: number; node?: string; data: unknown };
}

interface InterruptLike {
  id?: string;
  value?: unknown;
}

/**
 * The subscription channel of an event (what clients filter on): the method, except
 * `input.requested` → `input` and custom events with a name → `custom:<name>`.
 */
export function channelOf(method: string, data: unknown): string {
  if (method === "input.requested" || method === "input.answered") return "input";
  if (method === "custom") {
    const name = (data as { name?: unknown } | null)?.name;
    return typeof name === "string" ? `custom:${name}` : "custom";
  }
  return method;
}

/**
 * The name a protocol event travels under from the worker: JSON `[method, channel, namespace]`
 * (decoded by protocol-hub.ts), so the HTTP thread filters and numbers events without parsing them.
 */
export function protocolEventName(method: string, channel: string, namespace: readonly string[]): string {
  return JSON.stringify([method, channel, namespace]);
}

/**
 * Rewrites LangGraph's protocol events into what the server sends: interrupt values/updates are
 * withheld and announced as `input.requested` before the root's terminal lifecycle, which then
 * says `interrupted`. Pure apart from `emit`, so it is unit-tested on its own.
 */
export class ProtocolEventShaper {
  private interrupts: InterruptLike[] = [];
  private rootEnded = false;
  /** the last root values payload (the thread's new state, or LangGraph's interrupt chunk) */
  lastRootValues: { payload: unknown } | undefined;

  /** `graphName`: the root's name in lifecycle events (LangGraph says "root"; the graph id says more) */
  constructor(
    private readonly emitEvent: (channel: string, ev: ProtocolEventLike) => void,
    private readonly graphName = "root",
  ) {}

  get ended(): boolean {
    return this.rootEnded;
  }

  push(ev: ProtocolEventLike): void {
    const { method, params } = ev;
    const root = params.namespace.length === 0;
    if (method === "values" && isInterruptChunk(params.data)) {
      if (root) {
        this.lastRootValues = { payload: params.data };
        this.interrupts = [...((params.data as { __interrupt__: InterruptLike[] }).__interrupt__ ?? [])];
      }
      return;
    }
    if (method === "updates" && (params.node === "__interrupt__" || (params.data as { node?: unknown } | null)?.node === "__interrupt__")) return;
    if (method === "values" && root) this.lastRootValues = { payload: params.data };
    if (method === "lifecycle" && root && (params.data as { graph_name?: unknown } | null)?.graph_name === "root") {
      ev = { method, params: { ...params, data: { ...(params.data as object), graph_name: this.graphName } } };
    }
    if (method === "lifecycle" && root && isTerminal(params.data)) {
      this.rootEnded = true;
      const data = params.data as { event: string };
      if (data.event === "completed" && this.interrupts.length) {
        for (const it of this.interrupts) {
          this.emitEvent("input", {
            method: "input.requested",
            params: { namespace: [], timestamp: params.timestamp, data: { interrupt_id: it.id ?? "", payload: it.value ?? null } },
          });
        }
        this.emitEvent("lifecycle", { method, params: { ...ev.params, data: { ...(ev.params.data as object), event: "interrupted" } } });
        return;
      }
    }
    this.emitEvent(channelOf(method, params.data), ev);
  }

  /** The graph failed before LangGraph could say so (e.g. it did not load): end the root ourselves. */
  fail(message: string): void {
    if (this.rootEnded) return;
    this.rootEnded = true;
    this.emitEvent("lifecycle", {
      method: "lifecycle",
      params: { namespace: [], timestamp: Date.now(), data: { event: "failed", graph_name: this.graphName, error: message } },
    });
  }
}

function isInterruptChunk(data: unknown): boolean {
  return typeof data === "object" && data !== null && !Array.isArray(data) && Object.hasOwn(data, "__interrupt__");
}

function isTerminal(data: unknown): boolean {
  const e = (data as { event?: unknown } | null)?.event;
  return e === "completed" || e === "failed" || e === "interrupted";
}

/** Serialized event body (without seq/event_id, which the HTTP thread adds). */
export function protocolEventJson(ev: ProtocolEventLike): string {
  return toJsonText({ type: "event", method: ev.method, params: ev.params });
}

export function protocolEmitter(emit: EmitFn): (channel: string, ev: ProtocolEventLike) => void {
  return (channel, ev) => emit(protocolEventName(ev.method, channel, ev.params.namespace), protocolEventJson(ev));
}

/** The graph's copy of LangGraph can produce protocol events (streamEvents v3, LangGraph.js >= 1.7). */
export function supportsProtocol(lib: object): boolean {
  return typeof (lib as { convertToProtocolEvent?: unknown }).convertToProtocolEvent === "function";
}

export async function executeProtocolRun(o: ExecuteOptions): Promise<RunOutcome> {
  const { run, graph, signal } = o;
  const shaper = new ProtocolEventShaper(protocolEmitter(o.emit), run.graph_id);
  const finalValues = (): JsonSegments | undefined => (shaper.lastRootValues ? toJsonSegments(shaper.lastRootValues.payload) : undefined);
  const lastValuesInterrupt = (): boolean => isInterruptChunk(shaper.lastRootValues?.payload);
  if (!supportsProtocol(o.lib)) {
    const error = {
      error: "NotSupported",
      message: "This graph's @langchain/langgraph cannot stream the thread-centric protocol (needs LangGraph.js >= 1.7 with streamEvents v3)",
    };
    shaper.fail(error.message);
    return { status: "error", rolledBack: false, error };
  }
  const options = { ...buildRunConfig(run, signal, true), version: "v3" };
  try {
    const stream = (await graph.streamEvents(buildInput(run, o.lib), options)) as AsyncIterable<ProtocolEventLike>;
    for await (const ev of stream) shaper.push(ev);
    return { status: "success", rolledBack: false, lastValues: finalValues(), lastValuesInterrupt: lastValuesInterrupt() };
  } catch (err) {
    if (signal.aborted) {
      shaper.fail(signal.reason === "rollback" ? "Run rolled back" : "Run cancelled");
      return { status: "interrupted", rolledBack: signal.reason === "rollback", lastValues: finalValues(), lastValuesInterrupt: lastValuesInterrupt() };
    }
    const error = errorInfo(err);
    shaper.fail(error.message);
    return { status: "error", rolledBack: false, error, lastValues: finalValues(), lastValuesInterrupt: lastValuesInterrupt() };
  }
}
