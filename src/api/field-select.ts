// `select` for thread states, history and run lists (SDK 1.15: `threads.getState(…, {select})`,
// `threads.getHistory({select})`, `runs.list(…, {select})`): only the named fields are returned.
// States also accept `values.<key>` for one key of the values. An unknown field is a 422.
import type { JsonSchema } from "../http/schema-types.ts";

export const STATE_FIELDS = ["values", "next", "tasks", "metadata", "created_at", "checkpoint", "parent_checkpoint", "interrupts"] as const;
export const RUN_FIELDS = ["run_id", "thread_id", "assistant_id", "metadata", "status", "kwargs", "multitask_strategy", "created_at", "updated_at", "cancel_reason"] as const;

const VALUES_KEY = "values.";

/** Schema of a state `select`: top-level ThreadState fields or `values.<key>`. */
export const stateSelectSchema: JsonSchema = {
  type: "array",
  items: { type: "string", anyOf: [{ enum: [...STATE_FIELDS] }, { pattern: "^values\\..+" }] },
};

/** Schema of a run-list `select`. */
export const runSelectSchema: JsonSchema = { type: "array", items: { type: "string", enum: [...RUN_FIELDS] } };

/** The fields of `state` that `fields` names (all of it when `fields` is empty or absent). */
export function selectState(state: Record<string, unknown>, fields: readonly string[] | null | undefined): Record<string, unknown> {
  if (!fields?.length) return state;
  const out: Record<string, unknown> = {};
  const wholeValues = fields.includes("values");
  for (const field of fields) {
    if (field.startsWith(VALUES_KEY)) {
      if (wholeValues) continue;
      const key = field.slice(VALUES_KEY.length);
      const values = state.values;
      const picked = (out.values ??= {}) as Record<string, unknown>;
      if (typeof values === "object" && values !== null && !Array.isArray(values) && Object.hasOwn(values, key)) {
        picked[key] = (values as Record<string, unknown>)[key];
      }
    } else if (Object.hasOwn(state, field)) {
      out[field] = state[field];
    }
  }
  return out;
}
