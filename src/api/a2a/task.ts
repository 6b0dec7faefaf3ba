// A2A Task views of LangGraph runs (task id = run_id, context id = thread_id), built from the
// stored run and thread records: state mapping, status message, history and the final
// "Assistant Response" artifact.
import type { StoragePort } from "../../storage/port.ts";
import type { RunRecord, ThreadRecord, ThreadView } from "../../storage/records.ts";
import { threadView } from "../../storage/thread-values.ts";
import { uuid5 } from "../../util/ids.ts";
import { encodeMessage, dataPart, kind, stateName, textPart, type A2AMessage, type Dialect, type Part, type TaskState } from "./dialects.ts";
import { a2aMessageId, messagesOf, messageType, partsOf, roleOf, type PlainMessage } from "./messages.ts";
import { isRecord } from "../jsonrpc.ts";

const A2A_NAMESPACE = "9a6f1f4e-6a0c-5d7e-8a57-2f6c0a3b7a11";
export const ARTIFACT_NAME = "Assistant Response";

/** A run plus what decides its task state: its thread and whether it is the thread's latest run. */
export interface TaskSource {
  run: RunRecord;
  thread: ThreadView | undefined;
  latest: boolean;
}

export interface HistoryOptions {
  /** "context": the whole conversation up to the end of this task (default); "task": this task's messages only */
  scope: "context" | "task";
  /** keep only the last N messages */
  length?: number;
  includeArtifacts: boolean;
}

async function latestRunId(storage: StoragePort, threadId: string): Promise<string | undefined> {
  return (await storage.runs.latest(threadId))?.run_id;
}

/**
 * Task sources for one request over many runs (tasks/list): each thread's record and latest run
 * are read once, and its values (a long thread's whole history) are parsed only for the tasks
 * that are returned — a task's state needs the thread's status and interrupts, not its values.
 */
export class TaskSourceReader {
  private readonly latest = new Map<string, string | undefined>();
  private readonly records = new Map<string, ThreadRecord | undefined>();
  private readonly views = new Map<string, ThreadView | undefined>();

  constructor(private readonly storage: StoragePort) {}

  /** The run's source without its thread's values: enough for taskState(). */
  async withoutValues(run: RunRecord): Promise<TaskSource> {
    const tid = run.thread_id;
    if (!this.records.has(tid)) {
      this.records.set(tid, await this.storage.threads.get(tid));
      this.latest.set(tid, await latestRunId(this.storage, tid));
    }
    return { run, thread: this.records.get(tid), latest: this.latest.get(tid) === run.run_id };
  }

  /** The same source with its thread's values, parsed once per thread. */
  async withValues(src: TaskSource): Promise<TaskSource> {
    const tid = src.run.thread_id;
    if (!this.views.has(tid)) {
      const record = this.records.get(tid);
      this.views.set(tid, record === undefined ? undefined : await threadView(this.storage.threads, record));
    }
    return { ...src, thread: this.views.get(tid) };
  }
}

/** The run's thread with its values, as a task is built from them. */
export async function viewOf(storage: StoragePort, threadId: string): Promise<ThreadView | undefined> {
  const t = await storage.threads.get(threadId);
  return t === undefined ? undefined : threadView(storage.threads, t);
}

/** Load a task by run id; `threadId` narrows the lookup (and must match). */
export async function loadTask(storage: StoragePort, runId: string, threadId?: string): Promise<TaskSource | undefined> {
  if (runId.length > 64) return undefined; // task ids are run ids (UUIDs); a longer one is no LMDB key
  const tid = threadId ?? (await storage.runs.threadOf(runId));
  if (!tid) return undefined;
  const run = await storage.runs.get(tid, runId);
  if (!run) return undefined;
  return { run, thread: await viewOf(storage, tid), latest: (await latestRunId(storage, tid)) === runId };
}

const interruptValues = (thread: ThreadRecord | undefined): unknown[] =>
  Object.values(thread?.interrupts ?? {})
    .flatMap((list) => (Array.isArray(list) ? list : []))
    .map((i) => (isRecord(i) && "value" in i ? i.value : i));

/**
 * Run status → task state (reference §4.1). A cancelled run is "interrupted" in our run records,
 * so "interrupted" maps to input-required only when the thread really waits for input.
 */
export function taskState({ run, thread, latest }: TaskSource): TaskState {
  switch (run.status) {
    case "pending":
      return "submitted";
    case "running":
      return "working";
    case "error":
    case "timeout":
      return "failed";
    case "interrupted":
      return latest && interruptValues(thread).length > 0 ? "input-required" : "canceled";
    case "success":
      return latest && thread?.status === "interrupted" ? "input-required" : "completed";
  }
}

const agentMessage = (src: TaskSource, tag: string, parts: Part[]): A2AMessage => ({
  messageId: uuid5(`${src.run.run_id}:${tag}`, A2A_NAMESPACE),
  role: "agent",
  parts,
  contextId: src.run.thread_id,
  taskId: src.run.run_id,
});

function statusMessage(d: Dialect, src: TaskSource, state: TaskState): A2AMessage | undefined {
  if (state === "failed") {
    const e = src.run.error;
    const text = e ? `${e.error}: ${e.message}` : src.run.status === "timeout" ? "Run timed out" : "Run failed";
    return agentMessage(src, "status", [textPart(d, text)]);
  }
  if (state === "input-required") {
    const parts = interruptValues(src.thread).map((v) => (typeof v === "string" ? textPart(d, v) : dataPart(d, isRecord(v) ? v : { value: v })));
    return parts.length ? agentMessage(src, "status", parts) : undefined;
  }
  return undefined;
}

export function encodeStatus(d: Dialect, src: TaskSource, state: TaskState = taskState(src)): Record<string, unknown> {
  const m = statusMessage(d, src, state);
  return { state: stateName(d, state), ...(m ? { message: encodeMessage(d, m) } : {}), timestamp: src.run.updated_at };
}

/** Where this run's own messages sit in the thread's message list: from its first input message to the next foreign human message. */
function segment(msgs: PlainMessage[], run: RunRecord): { start: number; end: number } | undefined {
  const ids = new Set(
    messagesOf(run.kwargs.input)
      .map((m) => m.id)
      .filter((id): id is string => typeof id === "string"),
  );
  if (ids.size === 0) return undefined;
  const start = msgs.findIndex((m) => typeof m.id === "string" && ids.has(m.id));
  if (start < 0) return undefined;
  let end = start + 1;
  while (end < msgs.length && !(messageType(msgs[end]) === "human" && !ids.has(msgs[end].id as string))) end++;
  return { start, end };
}

const toA2A = (d: Dialect, m: PlainMessage, contextId: string, taskId: string | undefined, i: number): Record<string, unknown> =>
  encodeMessage(d, { messageId: a2aMessageId(m) ?? `${contextId}-${i}`, role: roleOf(m), parts: partsOf(d, m), contextId, taskId });

function history(d: Dialect, src: TaskSource, h: HistoryOptions): Record<string, unknown>[] {
  const { run } = src;
  const msgs = messagesOf(src.thread?.values);
  const seg = segment(msgs, run);
  let items: { m: PlainMessage; own: boolean }[];
  if (seg) {
    const from = h.scope === "task" ? seg.start : 0;
    items = msgs.slice(from, seg.end).map((m, i) => ({ m, own: from + i >= seg.start }));
  } else {
    const own = messagesOf(run.kwargs.input).map((m) => ({ m, own: true }));
    items = h.scope === "task" ? own : [...msgs.map((m) => ({ m, own: false })), ...own];
  }
  if (h.length !== undefined) items = h.length === 0 ? [] : items.slice(-h.length);
  return items.map(({ m, own }, i) => toA2A(d, m, run.thread_id, own ? run.run_id : undefined, i));
}

/** The final answer: the task's last AI message, else (graphs without messages) the state values. */
export function artifactOf(d: Dialect, src: TaskSource): Record<string, unknown> {
  const values = src.thread?.values;
  const msgs = messagesOf(values);
  const seg = segment(msgs, src.run);
  const pool = seg ? msgs.slice(seg.start, seg.end) : src.latest ? msgs : [];
  const ai = pool.filter((m) => messageType(m) === "ai").at(-1);
  let parts: Part[];
  if (ai) {
    parts = partsOf(d, ai);
    if (parts.length === 0) parts = [textPart(d, "")];
  } else parts = [isRecord(values) ? dataPart(d, values) : textPart(d, JSON.stringify(values ?? null))];
  return { artifactId: uuid5(`${src.run.run_id}:artifact`, A2A_NAMESPACE), name: ARTIFACT_NAME, parts };
}

export function buildTask(d: Dialect, src: TaskSource, h: HistoryOptions): Record<string, unknown> {
  const state = taskState(src);
  return {
    ...kind(d, "task"),
    id: src.run.run_id,
    contextId: src.run.thread_id,
    status: encodeStatus(d, src, state),
    ...(state === "completed" && h.includeArtifacts ? { artifacts: [artifactOf(d, src)] } : {}),
    history: history(d, src, h),
    metadata: { assistant_id: src.run.assistant_id, graph_id: src.run.graph_id },
  };
}
