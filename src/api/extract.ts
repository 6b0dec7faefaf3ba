// `extract` of POST /threads/search (SDK `threads.search({extract})` → `thread.extracted`): each
// alias names a path into the thread, e.g. {"last": "values.messages[-1].content", "user":
// "metadata.user_id"}. A path is dot-separated keys, each optionally followed by [index] (negative
// counts from the end); a missing step yields null. Malformed paths are a 422.
import type { Schema } from "../http/schema-types.ts";

const STEP = "[A-Za-z_$][\\w$-]*(\\[-?\\d+\\])*";
const PATH_PATTERN = `^${STEP}(\\.${STEP})*$`;

export const extractSchema: Schema<Record<string, string> | null> = {
  type: ["object", "null"],
  additionalProperties: { type: "string", pattern: PATH_PATTERN, maxLength: 256 },
  maxProperties: 20,
};

type PathStep = string | number;

/** "values.messages[-1].content" → ["values", "messages", -1, "content"] (the path matched PATH_PATTERN). */
export function parsePath(path: string): PathStep[] {
  const steps: PathStep[] = [];
  for (const part of path.split(".")) {
    const bracket = part.indexOf("[");
    steps.push(bracket === -1 ? part : part.slice(0, bracket));
    if (bracket === -1) continue;
    for (const m of part.slice(bracket).matchAll(/\[(-?\d+)\]/g)) steps.push(Number(m[1]));
  }
  return steps;
}

/** The value at `steps` in `root`, or null when a step is missing. */
export function valueAt(root: unknown, steps: readonly PathStep[]): unknown {
  let v: unknown = root;
  for (const step of steps) {
    if (typeof step === "number") {
      if (!Array.isArray(v)) return null;
      v = v[step < 0 ? v.length + step : step];
    } else {
      if (typeof v !== "object" || v === null || Array.isArray(v) || !Object.hasOwn(v, step)) return null;
      v = (v as Record<string, unknown>)[step];
    }
    if (v === undefined) return null;
  }
  return v;
}

/** `{alias: value at path}` for each alias of `extract`. */
export function extractFields(thread: object, extract: Record<string, string>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [alias, path] of Object.entries(extract)) out[alias] = valueAt(thread, parsePath(path));
  return out;
}
