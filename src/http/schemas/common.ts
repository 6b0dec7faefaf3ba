// Schema fragments shared by every endpoint group. Each route's body/query schema is built
// from these once at startup; ajv compiles them and the OpenAPI document reuses them.
import type { Json, JsonObject, RunnableConfigJson } from "../../util/json.ts";
import type { Accepted, Defaulted, JsonSchema, ObjectOf, Schema } from "../schema-types.ts";

export const anyValue: Schema<Json> = {};

// Strings that become (part of) an LMDB key are bounded: LMDB takes at most 1,978 bytes per key
// (a composite key's parts together), and a character is up to 4 bytes of UTF-8, while ajv's
// maxLength counts characters. The limits are documented in README ("HTTP limits").
/** ids and names that are keys or looked up as keys: assistant ids (UUID or graph name), graph ids, checkpoint namespaces */
export const MAX_KEY_CHARS = 256;
export const keyString: Schema<string> = { type: "string", maxLength: MAX_KEY_CHARS };
/** a checkpoint id given as a plain string (a UUID in practice) */
export const checkpointIdString: Schema<string> = { type: "string", maxLength: 64 };
export const object: Schema<JsonObject> = { type: "object" };
export const uuid: Schema<string> = { type: "string", format: "uuid" };
export const str: Schema<string> = { type: "string" };
export const bool: Schema<boolean> = { type: "boolean" };
export const int: Schema<number> = { type: "integer" };
export const nullable = <T>(s: Schema<T>): Schema<T | null> => ({ anyOf: [s, { type: "null" }] });
export const strings: Schema<string[]> = { type: "array", items: { type: "string" } };
export const limit = (max: number, def: number): Defaulted<number> => ({ type: "integer", minimum: 1, maximum: max, default: def });
export const offset: Defaulted<number> = { type: "integer", minimum: 0, default: 0 };
export const sortOrder = enumOf(["asc", "desc"]);

export const configSchema: Schema<RunnableConfigJson> = {
  type: "object",
  properties: {
    tags: strings,
    recursion_limit: int,
    configurable: { type: "object", properties: { checkpoint_ns: keyString, checkpoint_id: checkpointIdString } },
  },
};

export const checkpointSelector: Schema<{ checkpoint_id?: string; checkpoint_ns?: string; checkpoint_map?: JsonObject | null }> = {
  type: "object",
  properties: {
    checkpoint_id: uuid,
    checkpoint_ns: keyString,
    checkpoint_map: nullable(object),
  },
};

/** An object schema; its value type has the `required` properties (and those with defaults) always present. */
export function body<P extends Record<string, JsonSchema>, R extends keyof P & string = never>(
  properties: P,
  required: readonly R[] = [],
  extra: JsonSchema = {},
): Schema<ObjectOf<P, R>> {
  return { type: "object", properties, ...(required.length ? { required: [...required] } : {}), ...extra };
}

/** A string, with more keywords (format, pattern, lengths, description). */
export const text = (extra: JsonSchema = {}): Schema<string> => ({ type: "string", ...extra });
/** An integer, with more keywords (bounds, description). */
export const integer = (extra: JsonSchema = {}): Schema<number> => ({ type: "integer", ...extra });
/** A number, with more keywords (bounds, description). */
export const numeric = (extra: JsonSchema = {}): Schema<number> => ({ type: "number", ...extra });
/** A schema whose value ajv fills in when absent: the property is always present after validation. */
export const withDefault = <T>(s: Schema<T>, value: NoInfer<T>): Defaulted<T> => ({ ...s, default: value });

/** One of these strings. */
export function enumOf<const V extends readonly string[]>(values: V): Schema<V[number]> {
  return { type: "string", enum: values };
}

/** An array of what `items` accepts. */
export function arrayOf<T>(items: Schema<T>, extra: JsonSchema = {}): Schema<T[]> {
  return { type: "array", items, ...extra };
}

/** A value at least one of these schemas accepts. */
export function anyOf<S extends readonly Schema<unknown>[]>(...schemas: S): Schema<Accepted<S[number]>> {
  return { anyOf: [...schemas] };
}
