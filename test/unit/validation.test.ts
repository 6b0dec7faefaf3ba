// 422 wording (src/http/validation.ts): ajv errors as pydantic-style {loc, msg, type}, with unions
// reported by the branch that says what is wrong.
import { describe, expect, it } from "vitest";
import { compileBody } from "../../src/http/validation.ts";
import { nullable } from "../../src/http/schemas/common.ts";
import type { JsonSchema } from "../../src/http/schema-types.ts";

const check = (properties: Record<string, JsonSchema>, value: unknown) => compileBody({ type: "object", properties, required: [] })(value);

describe("validation issues", () => {
  it("name the expected type of a nullable field, not 'number,null'", () => {
    expect(check({ ttl: nullable({ type: "number" }) }, { ttl: "x" })).toEqual([{ loc: ["body", "ttl"], msg: "Input should be a valid number", type: "float_type" }]);
    expect(check({ ttl: { type: ["integer", "null"] } }, { ttl: "x" })).toEqual([{ loc: ["body", "ttl"], msg: "Input should be a valid integer", type: "int_type" }]);
    expect(check({ values: { type: ["object", "array", "null"] } }, { values: 5 })).toEqual([{ loc: ["body", "values"], msg: "Input should be a valid dictionary or list", type: "dict_type" }]);
  });

  it("list a nullable enum's allowed values", () => {
    expect(check({ strategy: nullable({ type: "string", enum: ["reject", "enqueue"] }) }, { strategy: "bogus" })).toEqual([
      { loc: ["body", "strategy"], msg: "Input should be 'reject' or 'enqueue'", type: "enum" },
    ]);
  });

  it("point into a nullable object at the field that is wrong", () => {
    const config = nullable({ type: "object", properties: { limit: { type: "integer" } }, required: ["name"] });
    expect(check({ config }, { config: { limit: "x" } })).toEqual([
      { loc: ["body", "config", "name"], msg: "Field required", type: "missing" },
      { loc: ["body", "config", "limit"], msg: "Input should be a valid integer", type: "int_type" },
    ]);
  });

  it("join the types of a union of types, and fall back to union_error for other unions", () => {
    expect(check({ input: { anyOf: [{ type: "string" }, { type: "array" }] } }, { input: 5 })).toEqual([
      { loc: ["body", "input"], msg: "Input should be a valid string or list", type: "string_type" },
    ]);
    const shapes = { anyOf: [{ type: "object", required: ["a"] }, { type: "object", required: ["b"] }] };
    expect(check({ shape: shapes }, { shape: {} })).toEqual([{ loc: ["body", "shape"], msg: "Input does not match any allowed form", type: "union_error" }]);
    expect(check({ x: { type: "string" } }, { x: 1 })).toEqual([{ loc: ["body", "x"], msg: "Input should be a valid string", type: "string_type" }]);
    expect(compileBody({ type: "object", required: ["a"] })({})).toEqual([{ loc: ["body", "a"], msg: "Field required", type: "missing" }]);
  });

  it("word length, pattern and extra-key errors like pydantic", () => {
    expect(check({ name: { type: "string", maxLength: 3 } }, { name: "long" })).toEqual([{ loc: ["body", "name"], msg: "String should have at most 3 character(s)", type: "string_too_long" }]);
    expect(check({ name: { type: "string", minLength: 1 } }, { name: "" })).toEqual([{ loc: ["body", "name"], msg: "String should have at least 1 character(s)", type: "string_too_short" }]);
    expect(check({ name: { type: "string", pattern: "^[a-z]+$" } }, { name: "A" })).toEqual([{ loc: ["body", "name"], msg: "String should match pattern '^[a-z]+$'", type: "string_pattern_mismatch" }]);
    expect(compileBody({ type: "object", properties: {}, additionalProperties: false })({ x: 1 })).toEqual([{ loc: ["body", "x"], msg: "Extra inputs are not permitted", type: "extra_forbidden" }]);
  });
});
