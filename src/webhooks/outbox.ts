// The webhook outbox: a thread actor writes a run's delivery record in the transaction of its final
// status, so no crash loses it; the webhook worker (deliverer.ts) delivers it and records the outcome.
import type { WebhooksPort } from "../storage/port.ts";
import type { RunRecord, WebhookAttemptRecord, WebhookDeliveryRecord } from "../storage/records.ts";
import { nowIso } from "../storage/records.ts";
import { uuid7 } from "../util/ids.ts";
import { buildWebhookPayload } from "./payload.ts";

/** The outbox key of a run's delivery. */
export type DeliveryKey = [threadId: string, runId: string];

/**
 * The delivery of a run that just ended with a `webhook`, to put in its final transaction.
 * `values`: the thread's state values after the run as UTF-8 JSON (stateful runs), stored as they are.
 */
export function newWebhookDelivery(run: RunRecord, values: Uint8Array | undefined, stateless: boolean): WebhookDeliveryRecord {
  const now = nowIso();
  const delivery: WebhookDeliveryRecord = {
    delivery_id: uuid7(),
    url: run.kwargs.webhook!,
    payload: buildWebhookPayload(run, undefined, stateless),
    created_at: now,
    attempts: 0,
    next_attempt_at: now,
  };
  if (values !== undefined && !stateless) delivery.values = values;
  return delivery;
}

/** A run's webhook delivery as `GET /threads/{thread_id}/runs/{run_id}/webhook` returns it. */
export interface WebhookDeliveryView {
  delivery_id: string;
  thread_id: string;
  run_id: string;
  /** pending: waiting for its first or next attempt; delivered: a 2xx; failed: given up */
  state: "pending" | "delivered" | "failed";
  attempts: number;
  created_at: string;
  /** when the next attempt is due (pending only) */
  next_attempt_at: string | null;
  last_attempt: { at: string; status_code: number | null; error: string | null } | null;
}

const attemptView = (a: WebhookAttemptRecord | undefined): WebhookDeliveryView["last_attempt"] =>
  a === undefined ? null : { at: a.at, status_code: a.status_code ?? null, error: a.error ?? null };

/** The run's delivery (pending in the outbox, or how it ended); undefined when it has none. */
export async function webhookDeliveryOf(
  webhooks: Pick<WebhooksPort, "get" | "outcome">,
  threadId: string,
  runId: string,
): Promise<WebhookDeliveryView | undefined> {
  const key = { threadId, runId };
  const ended = await webhooks.outcome(key);
  if (ended !== undefined) {
    return {
      delivery_id: ended.delivery_id,
      thread_id: threadId,
      run_id: runId,
      state: ended.state,
      attempts: ended.attempts,
      created_at: ended.created_at,
      next_attempt_at: null,
      last_attempt: attemptView(ended.last_attempt),
    };
  }
  const pending = await webhooks.get(key);
  if (pending === undefined) return undefined;
  return {
    delivery_id: pending.delivery_id,
    thread_id: threadId,
    run_id: runId,
    state: "pending",
    attempts: pending.attempts,
    created_at: pending.created_at,
    next_attempt_at: pending.next_attempt_at,
    last_attempt: attemptView(pending.last_attempt),
  };
}
