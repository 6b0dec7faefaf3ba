// Schema fragments shared by every endpoint group. Each route's body/query schema is built
// from these once at startup; ajv compiles them and the OpenAPI document reuses them.
import type { JsonSchema } from "../schema-types.ts";

export const anyValue: JsonSchema = {};
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
    configurable: object,
  },
};

export const checkpointSelector: JsonSchema = {
  type: "object",
  properties: {
    checkpoint_id: uuid,
    checkpoint_ns: str,
    checkpoint_map: nullable(object),
  },
};

export function body(properties: Record<string, JsonSchema>, required: string[] = []): JsonSchema {
  return { type: "object", properties, ...(required.length ? { required } : {}) };
}
