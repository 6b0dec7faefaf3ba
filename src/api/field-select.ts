// `select` for thread states, history, run lists and the searches of threads, assistants and crons
// (SDK 1.15: `threads.getState(…, {select})`, `threads.getHistory({select})`, `runs.list(…, {select})`,
// `threads/assistants/crons.search({select})`): only the named fields are returned. States also
// accept `values.<key>` for one key of the values. A field the SDK does not name is a 422.
import type { Schema } from "../http/schema-types.ts";

export const STATE_FIELDS = ["values", "next", "tasks", "metadata", "created_at", "checkpoint", "parent_checkpoint", "interrupts"] as const;
export const RUN_FIELDS = [
  "run_id",
  "thread_id",
  "assistant_id",
  "metadata",
  "status",
  "kwargs",
  "multitask_strategy",
  "created_at",
  "updated_at",
  "cancel_reason",
] as const;

const VALUES_KEY = "values.";

/** Schema of a state `select`: top-level ThreadState fields or `values.<key>`. */
export const stateSelectSchema: Schema<string[]> = {
  type: "array",
  items: { type: "string", anyOf: [{ enum: [...STATE_FIELDS] }, { pattern: "^values\\..+" }] },
};

/** Schema of a run-list `select`. */
export const runSelectSchema: Schema<string[]> = { type: "array", items: { type: "string", enum: [...RUN_FIELDS] } };

/** The SDK's ThreadSelectField, AssistantSelectField and CronSelectField (a field we never send is just absent). */
export const THREAD_FIELDS = [
  "thread_id",
  "created_at",
  "updated_at",
  "state_updated_at",
  "metadata",
  "config",
  "context",
  "status",
  "values",
  "interrupts",
] as const;
export const ASSISTANT_FIELDS = [
  "assistant_id",
  "graph_id",
  "name",
  "description",
  "config",
  "context",
  "created_at",
  "updated_at",
  "metadata",
  "version",
] as const;
export const CRON_FIELDS = [
  "cron_id",
  "assistant_id",
  "thread_id",
  "end_time",
  "schedule",
  "created_at",
  "updated_at",
  "user_id",
  "payload",
  "next_run_date",
  "metadata",
  "now",
  "timezone",
  "enabled",
  "on_run_completed",
] as const;

// null allowed by type (not nullable()'s anyOf), so an unknown item is reported at its own index
const fieldList = (fields: readonly string[]): Schema<string[] | null> => ({ type: ["array", "null"], items: { type: "string", enum: [...fields] } });
export const threadSelectSchema = fieldList(THREAD_FIELDS);
export const assistantSelectSchema = fieldList(ASSISTANT_FIELDS);
export const cronSelectSchema = fieldList(CRON_FIELDS);

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
