// ajv compiled once per route; failures become 422 HTTPValidationError items (loc/msg/type),
// worded like FastAPI/pydantic so Platform users recognise them.
//
// Cost of a 422 stays linear in the body and its report bounded: a body is first checked by a
// validator that stops at the first error (allErrors: false, also the fast path for valid
// bodies); only a body that fails is checked again with allErrors, by a validator whose schema
// has an error budget in every subschema applied once per array item or object entry, so a body
// of a million bad items stops after MAX_VALIDATION_ERRORS errors instead of making a million.
import { _, Ajv, type ErrorObject, type KeywordCxt, type ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";
import type { ValidationIssue } from "../errors.ts";
import type { JsonSchema } from "./schema-types.ts";

// ajv-formats ships CJS with a default export property
const addFormats = (addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule;

/** ajv errors collected for one report at most; the report itself names at most MAX_REPORTED_ISSUES */
export const MAX_VALIDATION_ERRORS = 200;
/** issues in one 422 at most (pydantic-style reports list every error; a bound keeps it small) */
export const MAX_REPORTED_ISSUES = 100;

const ERROR_BUDGET = "x-troupe-error-budget";

/** Thrown from generated code once the budget is spent; carries the errors collected so far. */
interface BudgetSpent {
  errorBudgetSpent: ErrorObject[];
}

function newAjv(allErrors: boolean, coerce: boolean): Ajv {
  const ajv = new Ajv({ allErrors, strict: false, useDefaults: true, ...(coerce ? { coerceTypes: "array" as const } : {}) });
  (addFormats as unknown as (a: Ajv) => void)(ajv);
  if (allErrors) {
    ajv.addKeyword({
      keyword: ERROR_BUDGET,
      schemaType: "boolean",
      // `errors` and `vErrors` are the counter and list of ajv's generated validate function
      code(cxt: KeywordCxt) {
        cxt.gen.if(_`errors >= ${MAX_VALIDATION_ERRORS}`, () => cxt.gen.throw(_`{errorBudgetSpent: vErrors}`));
      },
    });
  }
  return ajv;
}

const bodyAjv = newAjv(false, false);
const queryAjv = newAjv(false, true);
// compiled lazily, for requests that failed the first pass
const bodyAjvAll = newAjv(true, false);
const queryAjvAll = newAjv(true, true);

export type Validator = (value: unknown) => ValidationIssue[] | null;

export function compileBody(schema: JsonSchema, where = "body"): Validator {
  return validator(bodyAjv.compile(schema), () => bodyAjvAll.compile(withErrorBudget(schema)), where);
}

export function compileQuery(schema: JsonSchema): Validator {
  return validator(queryAjv.compile(schema), () => queryAjvAll.compile(withErrorBudget(schema)), "query");
}

function validator(first: ValidateFunction, compileAll: () => ValidateFunction, where: string): Validator {
  let all: ValidateFunction | undefined;
  return (value) => {
    if (first(value)) return null;
    all ??= compileAll();
    let errors: ErrorObject[];
    try {
      errors = all(value) ? (first.errors ?? []) : (all.errors ?? []);
    } catch (err) {
      if (!isBudgetSpent(err)) throw err;
      errors = err.errorBudgetSpent;
    }
    return toIssues(errors, where);
  };
}

const isBudgetSpent = (err: unknown): err is BudgetSpent => typeof err === "object" && err !== null && Array.isArray((err as BudgetSpent).errorBudgetSpent);

/** Subschemas applied once per array item or object entry (where error counts grow with the body). */
const PER_ENTRY = ["items", "additionalItems", "additionalProperties", "unevaluatedProperties", "unevaluatedItems", "propertyNames", "contains"];

/**
 * A copy of the schema with the error budget check in every per-entry subschema. A `false`
 * subschema (no extra keys) becomes `{not: {}}` with the check, reported as an extra input.
 */
export function withErrorBudget(schema: JsonSchema): JsonSchema {
  const visit = (s: unknown, perEntry: boolean): unknown => {
    if (s === false && perEntry) return { not: {}, [ERROR_BUDGET]: true };
    if (typeof s !== "object" || s === null) return s;
    if (Array.isArray(s)) return s.map((x) => visit(x, false));
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(s)) {
      if (k === "properties" || k === "patternProperties" || k === "$defs" || k === "definitions") {
        out[k] =
          typeof v === "object" && v !== null ? Object.fromEntries(Object.entries(v).map(([name, sub]) => [name, visit(sub, k === "patternProperties")])) : v;
      } else if (k === "enum" || k === "const" || k === "default" || k === "examples") {
        out[k] = v;
      } else {
        out[k] = visit(v, PER_ENTRY.includes(k));
      }
    }
    if (perEntry) out[ERROR_BUDGET] = true;
    return out;
  };
  return visit(schema, false) as JsonSchema;
}

export function toIssues(errors: ErrorObject[], where: string): ValidationIssue[] {
  if (errors.length > MAX_VALIDATION_ERRORS) errors = errors.slice(0, MAX_VALIDATION_ERRORS);
  const out: ValidationIssue[] = [];
  const seen = new Set<string>();
  // anyOf/oneOf produce one error per branch plus a summary; keep the summary only (worded from
  // its branches where one of them says it better, see unionIssue)
  const unions = errors.filter((e) => e.keyword === "anyOf" || e.keyword === "oneOf");
  const branchPaths = new Set(unions.map((e) => e.instancePath));
  for (const e of errors) {
    if (out.length >= MAX_REPORTED_ISSUES) break;
    const isUnion = e.keyword === "anyOf" || e.keyword === "oneOf";
    if (!isUnion && branchPaths.size > 0 && e.schemaPath.includes("Of/") && [...branchPaths].some((p) => e.instancePath.startsWith(p))) continue;
    const branches = isUnion ? failedBranches(e, errors) : [];
    // one branch failed for a reason other than the value being non-null (a nullable field):
    // its own errors, where they are, say what is wrong
    const issues = branches.length === 1 ? toIssues(branches[0]!, where) : [issueAt(e, where, isUnion ? unionIssue(branches) : issueOf(e))];
    for (const issue of issues) {
      const key = `${issue.loc.join("\u0000")}|${issue.type}`;
      if (seen.has(key) || out.length >= MAX_REPORTED_ISSUES) continue;
      seen.add(key);
      out.push(issue);
    }
  }
  return out;
}

function issueAt(e: ErrorObject, where: string, { msg, type, extraLoc }: IssueText): ValidationIssue {
  const loc: (string | number)[] = [where, ...pointerToPath(e.instancePath)];
  if (extraLoc !== undefined) loc.push(extraLoc);
  return { loc, msg, type };
}

interface IssueText {
  msg: string;
  type: string;
  /** a property name to add to loc (a missing field) */
  extraLoc?: string;
}

/**
 * The errors of each failed branch of a union, grouped by branch; the branch a nullable adds
 * (`{type: "null"}`) is left out, as "not null" says nothing about what the value should be.
 */
function failedBranches(summary: ErrorObject, errors: ErrorObject[]): ErrorObject[][] {
  const prefix = `${summary.schemaPath}/`;
  const branches = new Map<string, ErrorObject[]>();
  for (const b of errors) {
    if (!b.schemaPath.startsWith(prefix) || !b.instancePath.startsWith(summary.instancePath)) continue;
    if (b.keyword === "type" && b.instancePath === summary.instancePath && String((b.params as { type: unknown }).type) === "null") continue;
    const branch = b.schemaPath.slice(prefix.length).split("/")[0]!;
    const group = branches.get(branch);
    if (group) group.push(b);
    else branches.set(branch, [b]);
  }
  return [...branches.values()];
}

/** Several branches failed: a union of types fails as one type error naming them all. */
function unionIssue(branches: ErrorObject[][]): IssueText {
  const typeOnly = branches.length > 1 && branches.every((g) => g.length === 1 && g[0]!.keyword === "type");
  if (typeOnly) return typeIssue(branches.flatMap((g) => String((g[0]!.params as { type: unknown }).type).split(",")));
  return { msg: "Input does not match any allowed form", type: "union_error" };
}

function typeIssue(types: string[]): IssueText {
  const named = types.filter((t) => t !== "null");
  if (named.length === 0) return { msg: "Input should be null", type: "none_required" };
  return { msg: `Input should be a valid ${named.map((t) => TYPE_WORD[t] ?? t).join(" or ")}`, type: `${TYPE_TAG[named[0]!] ?? named[0]}_type` };
}

/** Keywords whose error names one limit: pydantic's wording for it, and its error type. */
const LIMIT_ISSUES: Record<string, [(limit: number) => string, string]> = {
  minimum: [(n) => `Input should be greater than or equal to ${n}`, "greater_than_equal"],
  exclusiveMinimum: [(n) => `Input should be greater than ${n}`, "greater_than"],
  maximum: [(n) => `Input should be less than or equal to ${n}`, "less_than_equal"],
  exclusiveMaximum: [(n) => `Input should be less than ${n}`, "less_than"],
  minItems: [(n) => `List should have at least ${n} item(s)`, "too_short"],
  maxItems: [(n) => `List should have at most ${n} item(s)`, "too_long"],
  minLength: [(n) => `String should have at least ${n} character(s)`, "string_too_short"],
  maxLength: [(n) => `String should have at most ${n} character(s)`, "string_too_long"],
  minProperties: [(n) => `Dictionary should have at least ${n} item(s)`, "too_short"],
};

function issueOf(e: ErrorObject): IssueText {
  const limited = LIMIT_ISSUES[e.keyword];
  if (limited !== undefined) return { msg: limited[0]((e.params as { limit: number }).limit), type: limited[1] };
  let msg = e.message ?? "invalid";
  let type: string = e.keyword;
  let extraLoc: string | undefined;
  switch (e.keyword) {
    case "required":
      extraLoc = (e.params as { missingProperty: string }).missingProperty;
      msg = "Field required";
      type = "missing";
      break;
    case "type":
      // ajv joins a list of types with "," (a field typed ["number", "null"])
      return typeIssue(String((e.params as { type: string | string[] }).type).split(","));
    case "enum": {
      const allowed = (e.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v).replace(/"/g, "'"));
      msg = `Input should be ${allowed.length > 1 ? `${allowed.slice(0, -1).join(", ")} or ${allowed.at(-1)}` : allowed[0]}`;
      type = "enum";
      break;
    }
    case "const":
      msg = `Input should be ${JSON.stringify((e.params as { allowedValue: unknown }).allowedValue)}`;
      type = "literal_error";
      break;
    case "format": {
      const f = (e.params as { format: string }).format;
      msg = f === "uuid" ? "Input should be a valid UUID" : `Input should be a valid ${f}`;
      type = f === "uuid" ? "uuid_parsing" : `${f}_parsing`;
      break;
    }
    case "pattern":
      msg = `String should match pattern '${(e.params as { pattern: string }).pattern}'`;
      type = "string_pattern_mismatch";
      break;
    case "additionalProperties":
      extraLoc = (e.params as { additionalProperty: string }).additionalProperty;
      msg = "Extra inputs are not permitted";
      type = "extra_forbidden";
      break;
    case "not":
      // `additionalProperties: false` as checked with an error budget (withErrorBudget)
      if (e.schemaPath.endsWith("/additionalProperties/not")) {
        msg = "Extra inputs are not permitted";
        type = "extra_forbidden";
      }
      break;
    case "anyOf":
    case "oneOf":
      msg = "Input does not match any allowed form";
      type = "union_error";
      break;
  }
  return { msg, type, extraLoc };
}

const TYPE_WORD: Record<string, string> = {
  integer: "integer",
  number: "number",
  string: "string",
  boolean: "boolean",
  object: "dictionary",
  array: "list",
  null: "null",
};
const TYPE_TAG: Record<string, string> = { integer: "int", number: "float", string: "string", boolean: "bool", object: "dict", array: "list", null: "none" };

function pointerToPath(p: string): (string | number)[] {
  if (!p) return [];
  return p
    .slice(1)
    .split("/")
    .map((s) => {
      const k = s.replace(/~1/g, "/").replace(/~0/g, "~");
      return /^\d+$/.test(k) ? Number(k) : k;
    });
}
