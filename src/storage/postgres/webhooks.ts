// The webhooks family on Postgres (tables webhook_outbox, webhook_outcomes): a run's delivery waits
// in the outbox (enqueued in the commit of the run's final record: runs.ts), the webhook worker
// records each retry and ends it, keeping the outcome while the run exists. The delivery's values
// (the run's final state as UTF-8 JSON) are a bytea column beside the record.
import type pg from "pg";
import type { RunKey, WebhooksPort } from "../port.ts";
import type { WebhookDeliveryRecord, WebhookOutcomeRecord } from "../records.ts";
import { jsonText } from "./json-columns.ts";
import { bytesParam } from "./threads.ts";

/** The delivery's columns as parameters: next_attempt_at, record (without values), values. */
export function deliveryValues(d: WebhookDeliveryRecord): [string, string, Buffer | null] {
  const { values, ...record } = d;
  return [d.next_attempt_at, jsonText(record), values === undefined ? null : bytesParam(values)];
}

/**
 * An upsert of a delivery from SQL expressions (parameters) for thread_id, run_id and
 * deliveryValues' three; with `when`, only when that condition holds.
 */
export function enqueueSql(threadId: string, runId: string, [next, record, values]: [string, string, string], when?: string): string {
  return `INSERT INTO webhook_outbox (thread_id, run_id, next_attempt_at, record, values_json)
  SELECT ${threadId}, ${runId}, ${next}, ${record}::json, ${values}::bytea${when === undefined ? "" : ` WHERE ${when}`}
  ON CONFLICT (thread_id, run_id) DO UPDATE SET next_attempt_at = EXCLUDED.next_attempt_at, record = EXCLUDED.record, values_json = EXCLUDED.values_json`;
}

interface DeliveryRow {
  record: WebhookDeliveryRecord;
  values_json: Buffer | null;
}

const toDelivery = (row: DeliveryRow): WebhookDeliveryRecord =>
  row.values_json === null ? row.record : { ...row.record, values: new Uint8Array(row.values_json) };

/**
 * This session's own deliveries: those written by this node (webhook_outbox.node_id defaults to the
 * session's troupe.node_id, src/cluster/schema.ts), or taken over by it. Outside a cluster both are null.
 */
const OWN_DELIVERIES = "node_id IS NOT DISTINCT FROM current_setting('troupe.node_id', true)";

export class PostgresWebhooks implements WebhooksPort {
  constructor(private readonly pool: pg.Pool) {}

  /** whether any of this node's deliveries waits (a dead node's are taken over by webhook-drain) */
  async anyPending(): Promise<boolean> {
    const r = await this.pool.query<{ any: boolean }>(`SELECT EXISTS (SELECT 1 FROM webhook_outbox WHERE ${OWN_DELIVERIES}) AS any`);
    return r.rows[0].any;
  }

  /** every waiting delivery of this node and when its next attempt is due, in (thread_id, run_id) order */
  async pending(): Promise<{ key: RunKey; nextAttemptAt: string }[]> {
    const r = await this.pool.query<{ thread_id: string; run_id: string; next_attempt_at: string }>(
      `SELECT thread_id, run_id, next_attempt_at FROM webhook_outbox WHERE ${OWN_DELIVERIES} ORDER BY thread_id, run_id`,
    );
    return r.rows.map((row) => ({ key: { threadId: row.thread_id, runId: row.run_id }, nextAttemptAt: row.next_attempt_at }));
  }

  async get(key: RunKey): Promise<WebhookDeliveryRecord | undefined> {
    const r = await this.pool.query<DeliveryRow>("SELECT record, values_json FROM webhook_outbox WHERE thread_id = $1 AND run_id = $2", [
      key.threadId,
      key.runId,
    ]);
    return r.rows[0] === undefined ? undefined : toDelivery(r.rows[0]);
  }

  async outcome(key: RunKey): Promise<WebhookOutcomeRecord | undefined> {
    const r = await this.pool.query<{ record: WebhookOutcomeRecord }>("SELECT record FROM webhook_outcomes WHERE thread_id = $1 AND run_id = $2", [
      key.threadId,
      key.runId,
    ]);
    return r.rows[0]?.record;
  }

  /** an attempt failed and will be retried: the delivery as it stays */
  async retry(key: RunKey, delivery: WebhookDeliveryRecord): Promise<void> {
    await this.pool.query(enqueueSql("$1", "$2", ["$3", "$4", "$5"]), [key.threadId, key.runId, ...deliveryValues(delivery)]);
  }

  /** the delivery leaves the outbox; its outcome is kept when the run still exists (one statement) */
  async end(key: RunKey, outcome: WebhookOutcomeRecord): Promise<void> {
    await this.pool.query(
      `WITH d AS (DELETE FROM webhook_outbox WHERE thread_id = $1 AND run_id = $2)
       INSERT INTO webhook_outcomes (thread_id, run_id, record)
       SELECT $1, $2, $3::json WHERE EXISTS (SELECT 1 FROM runs WHERE run_id = $2 AND thread_id = $1)
       ON CONFLICT (thread_id, run_id) DO UPDATE SET record = EXCLUDED.record`,
      [key.threadId, key.runId, jsonText(outcome)],
    );
  }
}
