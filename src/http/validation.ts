// ajv compiled once per route; failures become 422 HTTPValidationError items (loc/msg/type),
// worded like FastAPI/pydantic so Platform users recognise them.
import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";
import { TroupeError, type ValidationIssue } from "../errors.ts";
import type { JsonSchema } from "./schema-types.ts";

// ajv-formats ships CJS with a default export property
const addFormats = (addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule;

const bodyAjv = new Ajv({ allErrors: true, strict: false, useDefaults: true });
const queryAjv = new Ajv({ allErrors: true, strict: false, useDefaults: true, coerceTypes: "array" });
(addFormats as unknown as (a: Ajv) => void)(bodyAjv);
(addFormats as unknown as (a: Ajv) => void)(queryAjv);

export type Validator = (value: unknown) => ValidationIssue[] | null;

export function compileBody(schema: JsonSchema, where = "body"): Validator {
  return wrap(bodyAjv.compile(schema), where);
}

export function compileQuery(schema: JsonSchema): Validator {
  return wrap(queryAjv.compile(schema), "query");
}

function wrap(fn: ValidateFunction, where: string): Validator {
  return (value) => (fn(value) ? null : toIssues(fn.errors ?? [], where));
}

export function validationError(issues: ValidationIssue[]): TroupeError {
  return new TroupeError("VALIDATION", issues.map((i) => `${i.loc.join(".")}: ${i.msg}`).join("; "), { issues });
}

export function toIssues(errors: ErrorObject[], where: string): ValidationIssue[] {
  const out: ValidationIssue[] = [];
  const seen = new Set<string>();
  // anyOf/oneOf produce one error per branch plus a summary; keep the summary only
  const branchPaths = new Set(errors.filter((e) => e.keyword === "anyOf" || e.keyword === "oneOf").map((e) => e.instancePath));
  for (const e of errors) {
    if (e.keyword !== "anyOf" && e.keyword !== "oneOf" && [...branchPaths].some((p) => e.instancePath.startsWith(p) && e.schemaPath.includes("Of/"))) continue;
    const loc: (string | number)[] = [where, ...pointerToPath(e.instancePath)];
    let msg = e.message ?? "invalid";
    let type = e.keyword;
    switch (e.keyword) {
      case "required":
        loc.push((e.params as { missingProperty: string }).missingProperty);
        msg = "Field required";
        type = "missing";
        break;
      case "type": {
        const t = String((e.params as { type: string | string[] }).type);
        msg = `Input should be a valid ${TYPE_WORD[t] ?? t}`;
        type = `${TYPE_TAG[t] ?? t}_type`;
        break;
      }
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
      case "minimum": case "exclusiveMinimum":
        msg = `Input should be greater than or equal to ${(e.params as { limit: number }).limit}`;
        type = "greater_than_equal";
        break;
      case "maximum": case "exclusiveMaximum":
        msg = `Input should be less than or equal to ${(e.params as { limit: number }).limit}`;
        type = "less_than_equal";
        break;
      case "minItems":
        msg = `List should have at least ${(e.params as { limit: number }).limit} item(s)`;
        type = "too_short";
        break;
      case "anyOf": case "oneOf":
        msg = "Input does not match any allowed form";
        type = "union_error";
        break;
    }
    const key = `${loc.join("\u0000")}|${type}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ loc, msg, type });
  }
  return out;
}

const TYPE_WORD: Record<string, string> = { integer: "integer", number: "number", string: "string", boolean: "boolean", object: "dictionary", array: "list", null: "null" };
const TYPE_TAG: Record<string, string> = { integer: "int", number: "float", string: "string", boolean: "bool", object: "dict", array: "list", null: "none" };

function pointerToPath(p: string): (string | number)[] {
  if (!p) return [];
  return p.slice(1).split("/").map((s) => {
    const k = s.replace(/~1/g, "/").replace(/~0/g, "~");
    return /^\d+$/.test(k) ? Number(k) : k;
  });
}
