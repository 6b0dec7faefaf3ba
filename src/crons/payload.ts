// A cron stores the run-create fields it was given (its `payload`) and replays them on every
// tick: this file says which fields those are and how a PATCH changes them.
import type { Json, JsonObject } from "../storage/records.ts";

/** RunCreate fields a cron carries to each run it creates (everything else is cron-level). */
export const PAYLOAD_FIELDS = [
  "input",
  "config",
  "context",
  "webhook",
  "interrupt_before",
  "interrupt_after",
  "multitask_strategy",
  "stream_mode",
  "stream_subgraphs",
  "stream_resumable",
  "checkpoint_during",
  "durability",
] as const;

export type PayloadField = (typeof PAYLOAD_FIELDS)[number];

/**
 * Payload after applying `changes` to `base`: a present value replaces, `null` removes the field
 * (back to the run default), an absent key leaves it as it was.
 */
export function mergePayload(base: JsonObject, changes: Partial<Record<PayloadField, unknown>>): JsonObject {
  const out: JsonObject = { ...base };
  for (const f of PAYLOAD_FIELDS) {
    const v = changes[f];
    if (v === undefined) continue;
    if (v === null) delete out[f];
    else out[f] = v as Json;
  }
  return out;
}
