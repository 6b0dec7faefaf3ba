// Builds the run-completion webhook body (spec "Events › Payload") from a stored run record:
// the wire run plus timing, state values and a structured error. Runs in the actor worker.
import { INTERNAL_RUN_FIELDS, type RunRecord, type WebhookError, type WebhookPayload } from "../storage/records.ts";

export type { WebhookError, WebhookPayload } from "../storage/records.ts";

const WIRE_RUN_KEYS = ["run_id", "thread_id", "assistant_id", "metadata", "status", "kwargs", "multitask_strategy", "created_at", "updated_at"] as const;
const INTERNAL: ReadonlySet<string> = new Set(INTERNAL_RUN_FIELDS);
const FAILED_STATUSES: ReadonlySet<string> = new Set(["error", "timeout"]);

/**
 * `run_started_at` falls back to the end (then update) time for a run that was cancelled
 * before it started: it never ran, so its start and end coincide.
 */
export function buildWebhookPayload(run: RunRecord, values: unknown, stateless: boolean): WebhookPayload {
  const out: Record<string, unknown> = {};
  for (const k of WIRE_RUN_KEYS) out[k] = run[k];
  // wire fields added to the record later (e.g. cancel_reason) pass through; internal ones never do
  for (const [k, v] of Object.entries(run)) {
    if (!(k in out) && !INTERNAL.has(k) && v !== undefined) out[k] = v;
  }
  out.run_started_at = run.started_at ?? run.ended_at ?? run.updated_at;
  if (run.ended_at) out.run_ended_at = run.ended_at;
  if (!stateless && values !== undefined) out.values = values;
  if (FAILED_STATUSES.has(run.status)) out.error = normaliseError(run);
  return out as unknown as WebhookPayload;
}

function normaliseError(run: RunRecord): WebhookError {
  const e = run.error;
  if (e && typeof e.error === "string" && typeof e.message === "string") return { error: e.error, message: e.message };
  if (run.status === "timeout") return { error: "TimeoutError", message: "run timed out" };
  return { error: "Error", message: "run failed" };
}

/** Copy of `payload` with `webhook_sent_at` set, keeping the reference key order. */
export function stampSentAt(payload: WebhookPayload, sentAt: string): WebhookPayload {
  const out: Record<string, unknown> = {};
  let placed = false;
  for (const [k, v] of Object.entries(payload)) {
    if (k === "webhook_sent_at") continue;
    if (!placed && (k === "values" || k === "error")) {
      out.webhook_sent_at = sentAt;
      placed = true;
    }
    out[k] = v;
  }
  if (!placed) out.webhook_sent_at = sentAt;
  return out as unknown as WebhookPayload;
}

/**
 * The JSON text POSTed by one delivery attempt: the payload stamped with `webhook_sent_at`, the
 * run's state values spliced in as the JSON text they were stored as (never parsed here: a long
 * thread's state is large), then `error`, in the reference key order.
 */
export function webhookBody(payload: WebhookPayload, valuesJson: string | undefined, sentAt: string): string {
  const { values: _values, error, ...head } = stampSentAt(payload, sentAt);
  const tail = (valuesJson === undefined ? "" : `,"values":${valuesJson}`) + (error === undefined ? "" : `,"error":${JSON.stringify(error)}`);
  const text = JSON.stringify(head);
  return tail === "" ? text : `${text.slice(0, -1)}${tail}}`;
}
