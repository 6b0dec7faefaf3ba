// Schema fragments shared by every endpoint group. Each route's body/query schema is built
// from these once at startup; ajv compiles them and the OpenAPI document reuses them.
import type { JsonSchema } from "../schema-types.ts";

export const anyValue: JsonSchema = {};

// Strings that become (part of) an LMDB key are bounded: LMDB takes at most 1,978 bytes per key
// (a composite key's parts together), and a character is up to 4 bytes of UTF-8, while ajv's
// maxLength counts characters. The limits are documented in README ("HTTP limits").
/** ids and names that are keys or looked up as keys: assistant ids (UUID or graph name), graph ids, checkpoint namespaces */
export const MAX_KEY_CHARS = 256;
export const keyString: JsonSchema = { type: "string", maxLength: MAX_KEY_CHARS };
/** a checkpoint id given as a plain string (a UUID in practice) */
export const checkpointIdString: JsonSchema = { type: "string", maxLength: 64 };
export const object: JsonSchema = { type: "object" };
export const uuid: JsonSchema = { type: "string", format: "uuid" };
export const str: JsonSchema = { type: "string" };
export const bool: JsonSchema = { type: "boolean" };
export const int: JsonSchema = { type: "integer" };
export const nullable = (s: JsonSchema): JsonSchema => ({ anyOf: [s, { type: "null" }] });
export const strings: JsonSchema = { type: "array", items: { type: "string" } };
export const limit = (max: number, def: number): JsonSchema => ({ type: "integer", minimum: 1, maximum: max, default: def });
export const offset: JsonSchema = { type: "integer", minimum: 0, default: 0 };
export const sortOrder: JsonSchema = { type: "string", enum: ["asc", "desc"] };

export const configSchema: JsonSchema = {
  type: "object",
  properties: {
    tags: strings,
    recursion_limit: int,
    configurable: { type: "object", properties: { checkpoint_ns: keyString, checkpoint_id: checkpointIdString } },
  },
};

export const checkpointSelector: JsonSchema = {
  type: "object",
  properties: {
    checkpoint_id: uuid,
    checkpoint_ns: keyString,
    checkpoint_map: nullable(object),
  },
};

export function body(properties: Record<string, JsonSchema>, required: string[] = []): JsonSchema {
  return { type: "object", properties, ...(required.length ? { required } : {}) };
}
