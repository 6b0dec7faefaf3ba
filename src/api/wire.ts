// Wire projections of stored records (internal fields removed) and SSE framing.
import { INTERNAL_RUN_FIELDS, type RunRecord } from "../storage/records.ts";
import type { RunEvent } from "../bridge/messages.ts";

export type WireRun = Omit<RunRecord, (typeof INTERNAL_RUN_FIELDS)[number]>;

export function wireRun(run: RunRecord): WireRun {
  const { graph_id: _g, attempt: _a, on_completion: _o, started_at: _s, ended_at: _e, error: _err, ...rest } = run;
  const kwargs = { ...rest.kwargs } as Record<string, unknown>;
  delete kwargs.__resume_from_checkpoint; // a flag older versions stored in recovered runs' records
  return { ...rest, kwargs: kwargs as unknown as WireRun["kwargs"] };
}

/** The numeric Last-Event-ID a reconnecting SSE client sent, if any (-1 = from the start). */
export function lastEventId(headers: Record<string, string | undefined>): number | undefined {
  const raw = headers["last-event-id"]?.trim();
  return raw !== undefined && /^-?\d+$/.test(raw) ? Number(raw) : undefined;
}

export function sseFrame(e: Pick<RunEvent, "id" | "event" | "data">, withId: boolean): string {
  return withId ? `event: ${e.event}\ndata: ${e.data}\nid: ${e.id}\n\n` : `event: ${e.event}\ndata: ${e.data}\n\n`;
}

export function sseSynthetic(event: string, dataJson: string): string {
  return `event: ${event}\ndata: ${dataJson}\n\n`;
}
