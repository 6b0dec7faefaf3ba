// 422 wording (src/http/validation.ts): ajv errors as pydantic-style {loc, msg, type}, with unions
// reported by the branch that says what is wrong.
import { describe, expect, it } from "vitest";
import { compileBody, MAX_REPORTED_ISSUES } from "../../src/http/validation.ts";
import { nullable } from "../../src/http/schemas/common.ts";
import type { JsonSchema } from "../../src/http/schema-types.ts";

const check = (properties: Record<string, JsonSchema>, value: unknown) => compileBody({ type: "object", properties, required: [] })(value);

describe("validation issues", () => {
  it("name the expected type of a nullable field, not 'number,null'", () => {
    expect(check({ ttl: nullable({ type: "number" }) }, { ttl: "x" })).toEqual([
      { loc: ["body", "ttl"], msg: "Input should be a valid number", type: "float_type" },
    ]);
    expect(check({ ttl: { type: ["integer", "null"] } }, { ttl: "x" })).toEqual([
      { loc: ["body", "ttl"], msg: "Input should be a valid integer", type: "int_type" },
    ]);
    expect(check({ values: { type: ["object", "array", "null"] } }, { values: 5 })).toEqual([
      { loc: ["body", "values"], msg: "Input should be a valid dictionary or list", type: "dict_type" },
    ]);
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
    const shapes = {
      anyOf: [
        { type: "object", required: ["a"] },
        { type: "object", required: ["b"] },
      ],
    };
    expect(check({ shape: shapes }, { shape: {} })).toEqual([{ loc: ["body", "shape"], msg: "Input does not match any allowed form", type: "union_error" }]);
    expect(check({ x: { type: "string" } }, { x: 1 })).toEqual([{ loc: ["body", "x"], msg: "Input should be a valid string", type: "string_type" }]);
    expect(compileBody({ type: "object", required: ["a"] })({})).toEqual([{ loc: ["body", "a"], msg: "Field required", type: "missing" }]);
  });

  it("word length, pattern and extra-key errors like pydantic", () => {
    expect(check({ name: { type: "string", maxLength: 3 } }, { name: "long" })).toEqual([
      { loc: ["body", "name"], msg: "String should have at most 3 character(s)", type: "string_too_long" },
    ]);
    expect(check({ name: { type: "string", minLength: 1 } }, { name: "" })).toEqual([
      { loc: ["body", "name"], msg: "String should have at least 1 character(s)", type: "string_too_short" },
    ]);
    expect(check({ name: { type: "string", pattern: "^[a-z]+$" } }, { name: "A" })).toEqual([
      { loc: ["body", "name"], msg: "String should match pattern '^[a-z]+$'", type: "string_pattern_mismatch" },
    ]);
    expect(compileBody({ type: "object", properties: {}, additionalProperties: false })({ x: 1 })).toEqual([
      { loc: ["body", "x"], msg: "Extra inputs are not permitted", type: "extra_forbidden" },
    ]);
  });
});

describe("validation cost", () => {
  // before: building the report copied an array per failed item (quadratic) and ajv listed every
  // one of a million errors; 32,000 nulls took ~40 s, a million took minutes and ~2 GB
  it("reports at most MAX_REPORTED_ISSUES issues for a million bad items, in linear time", { timeout: 20_000 }, () => {
    const million = new Array<null>(1_000_000).fill(null);
    const plain = check({ suffix: { type: "array", items: { type: "string" } } }, { suffix: million });
    expect(plain).toHaveLength(MAX_REPORTED_ISSUES);
    expect(plain![0]).toEqual({ loc: ["body", "suffix", 0], msg: "Input should be a valid string", type: "string_type" });
    expect(plain!.at(-1)!.loc).toEqual(["body", "suffix", MAX_REPORTED_ISSUES - 1]);
    // a nullable list (a union): the list branch's item errors, as for a short list
    const union = check({ index: nullable({ type: "array", items: { type: "string" } }) }, { index: million });
    expect(union!.length).toBeGreaterThan(0);
    expect(union!.length).toBeLessThanOrEqual(MAX_REPORTED_ISSUES);
    expect(union![0]).toEqual({ loc: ["body", "index", 0], msg: "Input should be a valid string", type: "string_type" });
    // a million bad values of a dictionary
    const dict = Object.fromEntries(Array.from({ length: 200_000 }, (_, i) => [`k${i}`, i]));
    const values = check({ extract: { type: "object", additionalProperties: { type: "string" } } }, { extract: dict });
    expect(values).toHaveLength(MAX_REPORTED_ISSUES);
    expect(values![0]).toEqual({ loc: ["body", "extract", "k0"], msg: "Input should be a valid string", type: "string_type" });
  });

  it("caps extra-key reports of a strict object, worded as before", () => {
    const strict = compileBody({ type: "object", properties: { a: { type: "integer" } }, additionalProperties: false });
    const many = Object.fromEntries(Array.from({ length: 100_000 }, (_, i) => [`x${i}`, 1]));
    const issues = strict({ a: "no", ...many });
    expect(issues).toHaveLength(MAX_REPORTED_ISSUES);
    expect(issues).toContainEqual({ loc: ["body", "x0"], msg: "Extra inputs are not permitted", type: "extra_forbidden" });
  });

  it("still lists every error of a small body, and applies defaults to valid ones", () => {
    const v = compileBody({ type: "object", properties: { a: { type: "string" }, b: { type: "integer" }, c: { type: "string", default: "x" } } });
    expect(v({ a: 1, b: "2" })).toEqual([
      { loc: ["body", "a"], msg: "Input should be a valid string", type: "string_type" },
      { loc: ["body", "b"], msg: "Input should be a valid integer", type: "int_type" },
    ]);
    const ok: Record<string, unknown> = { a: "y" };
    expect(v(ok)).toBeNull();
    expect(ok.c).toBe("x");
  });
});
