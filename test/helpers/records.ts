// Storage records for storage-port tests: a thread and a pending run with every field a record
// needs, at one fixed time; a test overrides the fields it is about.
import type { AssistantRecord, RunRecord, ThreadRecord } from "../../src/storage/records.ts";

export const T0 = "2026-01-01T00:00:00.000Z";

export function assistantRecord(id: string, over: Partial<AssistantRecord> = {}): AssistantRecord {
  return {
    assistant_id: id,
    graph_id: "echo",
    version: 1,
    config: {},
    context: null,
    created_at: T0,
    updated_at: T0,
    metadata: {},
    name: id,
    description: null,
    ...over,
  };
}

export function threadRecord(id: string, over: Partial<ThreadRecord> = {}): ThreadRecord {
  return { thread_id: id, created_at: T0, updated_at: T0, metadata: {}, status: "idle", config: {}, ...over };
}

export function runRecord(threadId: string, runId: string, over: Partial<RunRecord> = {}): RunRecord {
  return {
    run_id: runId,
    thread_id: threadId,
    assistant_id: "asst-1",
    metadata: {},
    status: "pending",
    kwargs: { input: { n: 1 }, config: {}, stream_mode: ["values"], temporary: false, subgraphs: false, resumable: false },
    multitask_strategy: "enqueue",
    created_at: T0,
    updated_at: T0,
    graph_id: "g",
    attempt: 0,
    ...over,
  };
}
