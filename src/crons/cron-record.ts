// Building and patching cron records from API bodies (pure: no storage, no scheduling), so the
// HTTP handler can validate a result before it is written and re-apply it inside a transaction.
import type { CronRecord, JsonObject } from "../storage/records.ts";
import { nowIso } from "../storage/records.ts";
import { mergePayload, type PayloadField } from "./payload.ts";
import { nextRunDate } from "./schedule.ts";

/** Cron-level fields of POST /runs/crons and POST /threads/{id}/runs/crons (§8.1). */
export interface CronCreate extends Partial<Record<PayloadField, unknown>> {
  assistant_id: string;
  schedule: string;
  timezone?: string | null;
  metadata?: JsonObject | null;
  enabled?: boolean | null;
  end_time?: string | null;
  on_run_completed?: "delete" | "keep" | null;
}

/** PATCH /runs/crons/{id}: every field optional; `end_time: null` clears the end time. */
export type CronPatch = Partial<Omit<CronCreate, "assistant_id">>;

const isoOrNull = (t: string | null | undefined): string | null => (t ? new Date(t).toISOString() : null);

export function newCronRecord(b: CronCreate, ids: { cronId: string; assistantId: string; threadId: string | null; userId: string | null }): CronRecord {
  const now = nowIso();
  const rec: CronRecord = {
    cron_id: ids.cronId,
    assistant_id: ids.assistantId,
    thread_id: ids.threadId,
    // only stateless crons create (and so may delete) a thread per run
    on_run_completed: ids.threadId === null ? (b.on_run_completed ?? "delete") : null,
    end_time: isoOrNull(b.end_time),
    schedule: b.schedule,
    timezone: b.timezone ?? null,
    created_at: now,
    updated_at: now,
    payload: mergePayload({}, b),
    user_id: ids.userId,
    next_run_date: null,
    metadata: b.metadata ?? {},
    enabled: b.enabled ?? true,
  };
  rec.next_run_date = nextRunDate(rec);
  return rec;
}

/** Absent fields keep their value; metadata is merged; next_run_date is recomputed. */
export function patchCronRecord(cur: CronRecord, p: CronPatch): CronRecord {
  const next: CronRecord = {
    ...cur,
    schedule: p.schedule ?? cur.schedule,
    timezone: p.timezone === undefined ? cur.timezone : p.timezone,
    end_time: p.end_time === undefined ? cur.end_time : isoOrNull(p.end_time),
    enabled: p.enabled ?? cur.enabled,
    on_run_completed: cur.thread_id === null ? (p.on_run_completed ?? cur.on_run_completed) : null,
    metadata: p.metadata ? { ...cur.metadata, ...p.metadata } : cur.metadata,
    payload: mergePayload(cur.payload, p),
    updated_at: nowIso(),
  };
  next.next_run_date = nextRunDate(next);
  return next;
}
