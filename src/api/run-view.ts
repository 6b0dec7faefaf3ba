// What a run record looks like on the wire: the stored record without the fields only the
// runtime uses (attempts, timing, the error kept for webhooks and A2A).
import { INTERNAL_RUN_FIELDS, type RunRecord } from "../storage/records.ts";

export type WireRun = Omit<RunRecord, (typeof INTERNAL_RUN_FIELDS)[number]>;

export function wireRun(run: RunRecord): WireRun {
  const { graph_id: _g, attempt: _a, on_completion: _o, started_at: _s, ended_at: _e, error: _err, ...rest } = run;
  const kwargs = { ...rest.kwargs } as Record<string, unknown>;
  delete kwargs.__resume_from_checkpoint; // a flag older versions stored in recovered runs' records
  return { ...rest, kwargs: kwargs as unknown as WireRun["kwargs"] };
}
