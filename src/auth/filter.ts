// Matching an auth handler's filter against a record's metadata (reference §11.1): every key must
// match; `{k: v}` and `{k: {$eq: v}}` are equality, `{k: {$contains: v | v[]}}` needs metadata[k]
// to be an array holding every value. Store items are matched as `{...value, namespace, key}`.
import { deepEqual } from "../util/deep-equal.ts";
import type { JsonObject } from "../storage/records.ts";
import type { AuthFilter } from "./types.ts";

export function matchesAuthFilter(filter: AuthFilter | undefined, metadata: unknown): boolean {
  if (filter === undefined) return true;
  const record = typeof metadata === "object" && metadata !== null ? (metadata as Record<string, unknown>) : {};
  for (const [key, cond] of Object.entries(filter)) {
    const actual = Object.hasOwn(record, key) ? record[key] : undefined;
    if (!matchesCondition(actual, cond)) return false;
  }
  return true;
}

function matchesCondition(actual: unknown, cond: unknown): boolean {
  if (typeof cond !== "object" || cond === null || Array.isArray(cond)) return deepEqual(actual, cond);
  const ops = cond as Record<string, unknown>;
  const hasEq = Object.hasOwn(ops, "$eq");
  const hasContains = Object.hasOwn(ops, "$contains");
  if (!hasEq && !hasContains) return deepEqual(actual, cond);
  if (hasEq && !deepEqual(actual, ops.$eq)) return false;
  if (hasContains) {
    if (!Array.isArray(actual)) return false;
    const wanted = Array.isArray(ops.$contains) ? ops.$contains : [ops.$contains];
    if (!wanted.every((w) => actual.some((a) => deepEqual(a, w)))) return false;
  }
  return true;
}

/** The object a store filter is matched against. */
export const storeMatchTarget = (namespace: readonly string[], key: string, value?: Record<string, unknown>): Record<string, unknown> => ({
  ...(value ?? {}),
  namespace: [...namespace],
  key,
});

/** Metadata read back from a handler's `value`: anything but a plain object counts as none ({}). */
export const asMetadata = (v: unknown): JsonObject => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as JsonObject) : {});
