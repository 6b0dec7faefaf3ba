// Persisted record shapes. Field names follow the wire (snake_case) so handlers can emit
// records without copying; fields that are internal only are listed in INTERNAL_RUN_FIELDS.

import type { Json, JsonObject, RunnableConfigJson } from "../util/json.ts";
export type { Json, JsonObject, RunnableConfigJson };

export type ThreadStatus = "idle" | "busy" | "interrupted" | "error";
export type RunStatus = "pending" | "running" | "success" | "error" | "timeout" | "interrupted";
export type MultitaskStrategy = "reject" | "interrupt" | "rollback" | "enqueue";
export type StreamMode = "values" | "messages" | "messages-tuple" | "updates" | "events" | "tasks" | "checkpoints" | "debug" | "custom" | "tools";

export interface AssistantRecord {
  assistant_id: string;
  version: number;
  config: RunnableConfigJson;
  context: Json;
  created_at: string;
  updated_at: string;
  graph_id: string;
  metadata: JsonObject;
  name: string;
  description: string | null;
}

export interface AssistantVersionRecord {
  assistant_id: string;
  version: number;
  graph_id: string;
  config: RunnableConfigJson;
  context: Json;
  metadata: JsonObject;
  name: string;
  description: string | null;
  created_at: string;
}

/**
 * An assistant after a PATCH (AssistantsPort.patch), as both adapters store it: fields given
 * replace the current ones (metadata merges key by key; context and description may be set to
 * null-like values, so only `undefined` keeps them), under the next version number.
 */
export function patchedAssistant(
  a: AssistantRecord,
  change: Partial<Pick<AssistantRecord, "graph_id" | "config" | "context" | "metadata" | "name" | "description">>,
  version: number,
  now: string,
): AssistantRecord {
  return {
    ...a,
    graph_id: change.graph_id ?? a.graph_id,
    config: change.config ?? a.config,
    context: change.context !== undefined ? change.context : a.context,
    metadata: change.metadata ? { ...a.metadata, ...change.metadata } : a.metadata,
    name: change.name ?? a.name,
    description: change.description !== undefined ? change.description : a.description,
    version,
    updated_at: now,
  };
}

/** The version record an assistant's current state is kept as. */
export const assistantVersionOf = (a: AssistantRecord): AssistantVersionRecord => ({
  assistant_id: a.assistant_id,
  version: a.version,
  graph_id: a.graph_id,
  config: a.config,
  context: a.context,
  metadata: a.metadata,
  name: a.name,
  description: a.description,
  created_at: a.updated_at,
});

/**
 * A thread as stored in `threads`. Its state values live apart, as JSON text in `thread_values`
 * (written once per run end), so the record every run rewrites stays small on long threads.
 */
export interface ThreadRecord {
  thread_id: string;
  created_at: string;
  updated_at: string;
  metadata: JsonObject;
  status: ThreadStatus;
  config: RunnableConfigJson;
  interrupts?: Record<string, Json[]>;
}

/** A thread as the API returns it: the record plus its latest state values, when it has any. */
export interface ThreadView extends ThreadRecord {
  values?: Json;
}

/** Everything needed to execute a run, as accepted at creation (JSON-safe). */
export interface RunKwargs {
  input?: Json;
  command?: JsonObject;
  config: RunnableConfigJson;
  context?: Json;
  stream_mode: StreamMode[];
  interrupt_before?: "*" | string[];
  interrupt_after?: "*" | string[];
  webhook?: string;
  feedback_keys?: string[];
  temporary: boolean;
  subgraphs: boolean;
  resumable: boolean;
  checkpoint_during?: boolean;
  durability?: "exit" | "async" | "sync";
  /** started through the thread-centric protocol (run.start, input.respond, state.fork): streams protocol events */
  protocol?: boolean;
}

export interface RunRecord {
  run_id: string;
  thread_id: string;
  assistant_id: string;
  metadata: JsonObject;
  status: RunStatus;
  kwargs: RunKwargs;
  multitask_strategy: MultitaskStrategy;
  created_at: string;
  updated_at: string;
  /**
   * Set (committed with the 2xx reply) when a stop was accepted for the run: "interrupt" or
   * "rollback" (lifecycle.ts stopActionOf). On the wire as the SDK's Run.cancel_reason.
   */
  cancel_reason?: string;
  // internal (not on the wire)
  graph_id: string;
  attempt: number;
  on_completion?: "delete" | "keep";
  started_at?: string;
  ended_at?: string;
  error?: { error: string; message: string };
}

export const INTERNAL_RUN_FIELDS = ["graph_id", "attempt", "on_completion", "started_at", "ended_at", "error"] as const;

/** Error shape carried by a failed run's webhook (spec; platform ≥ 0.7.46). */
export interface WebhookError {
  error: string;
  message: string;
}

/**
 * The JSON body POSTed to a run's webhook URL (src/webhooks/payload.ts builds it; the outbox keeps
 * it). Key order follows the reference: the wire run, then run_started_at, run_ended_at,
 * webhook_sent_at, values, error.
 */
export interface WebhookPayload {
  run_id: string;
  thread_id: string;
  assistant_id: string;
  metadata: RunRecord["metadata"];
  status: RunRecord["status"];
  kwargs: RunRecord["kwargs"];
  multitask_strategy: RunRecord["multitask_strategy"];
  created_at: string;
  updated_at: string;
  run_started_at: string;
  /** Omitted when the run has not ended. */
  run_ended_at?: string;
  /** Stamped by the sender for each delivery attempt; never set by the builder. */
  webhook_sent_at?: string;
  /** Latest checkpoint values; stateful runs only, and only when the caller has them. */
  values?: unknown;
  /** Present only when the run failed. */
  error?: WebhookError;
}

/** One attempt to deliver a run's webhook, as its delivery record keeps it. */
export interface WebhookAttemptRecord {
  at: string;
  /** the receiver's HTTP status, when it answered */
  status_code?: number;
  /** why the attempt failed (network error, timeout, HTTP status, refused URL) */
  error?: string;
}

/**
 * A run's webhook delivery waiting in the outbox (`webhook_outbox`, key [thread_id, run_id]):
 * written in the run's final transaction, updated after each failed attempt, removed once
 * delivered or given up (src/webhooks/README.md).
 */
export interface WebhookDeliveryRecord {
  /** stable across attempts and restarts: the `webhook-id` header */
  delivery_id: string;
  url: string;
  /** the body without `webhook_sent_at` and `values` (src/webhooks/payload.ts) */
  payload: WebhookPayload;
  /** the run's final state values as UTF-8 JSON, spliced into the body as they are */
  values?: Uint8Array;
  created_at: string;
  /** attempts made so far */
  attempts: number;
  next_attempt_at: string;
  last_attempt?: WebhookAttemptRecord;
}

/** How a run's webhook delivery ended (`webhook_outcomes`, key [thread_id, run_id]). */
export interface WebhookOutcomeRecord {
  delivery_id: string;
  state: "delivered" | "failed";
  attempts: number;
  created_at: string;
  last_attempt?: WebhookAttemptRecord;
}

export interface StoreItemRecord {
  namespace: string[];
  key: string;
  value: JsonObject;
  created_at: string;
  updated_at: string;
}

export interface CronRecord {
  cron_id: string;
  assistant_id: string;
  thread_id: string | null;
  on_run_completed: "delete" | "keep" | null;
  end_time: string | null;
  schedule: string;
  timezone: string | null;
  created_at: string;
  updated_at: string;
  payload: JsonObject;
  user_id: string | null;
  next_run_date: string | null;
  metadata: JsonObject;
  enabled: boolean;
}

export const nowIso = (): string => new Date().toISOString();
