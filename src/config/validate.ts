// Runs the compiled config schema and turns ajv's reports into ConfigProblems keyed by dotted
// path: type/range errors become problems, unknown keys become warnings (Docker-only keys: nothing).

import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import { CONFIG_SCHEMA } from "./schema.ts";
import { SILENT_TOP_LEVEL_KEYS } from "./defaults.ts";
import { describeValue, type KeyPath, type ProblemCollector } from "./errors.ts";
import type { RawConfig } from "./types.ts";

let compiled: ValidateFunction | undefined;

function validator(): ValidateFunction {
  compiled ??= new Ajv({ allErrors: true, strict: true, allowUnionTypes: true }).compile(CONFIG_SCHEMA);
  return compiled;
}

/** JSON pointer `/a/b~1c/0` → `["a","b/c",0]` (array indices become numbers). */
function pointerToPath(pointer: string, root: unknown): (string | number)[] {
  if (pointer === "") return [];
  const out: (string | number)[] = [];
  let node: unknown = root;
  for (const raw of pointer.slice(1).split("/")) {
    const seg = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    const key: string | number = Array.isArray(node) && /^\d+$/.test(seg) ? Number(seg) : seg;
    out.push(key);
    node = node !== null && typeof node === "object" ? (node as Record<string, unknown>)[seg] : undefined;
  }
  return out;
}

function valueAt(root: unknown, path: KeyPath): unknown {
  let node = root;
  for (const seg of path) {
    if (node === null || typeof node !== "object") return undefined;
    node = (node as Record<string | number, unknown>)[seg];
  }
  return node;
}

function problemText(err: ErrorObject, value: unknown): string {
  const params = err.params as Record<string, unknown>;
  switch (err.keyword) {
    case "type": {
      const types = Array.isArray(params.type) ? params.type : String(params.type).split(",");
      const want = types.map((t) => (/^[aeiou]/.test(t) ? `an ${t}` : `a ${t}`));
      return `must be ${want.join(" or ")} — got ${describeValue(value)}`;
    }
    case "enum":
      return `must be one of ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(", ")} — got ${describeValue(value)}`;
    case "minLength":
      return "must not be empty";
    case "minProperties":
      return "must define at least one entry";
    case "minItems":
      return "must not be an empty list";
    default:
      return `${err.message ?? "is invalid"} — got ${describeValue(value)}`;
  }
}

/** Validates `data`; reports into `out`. Returns the data typed when there was no problem. */
export function validateRawConfig(data: unknown, out: ProblemCollector): RawConfig | null {
  const validate = validator();
  const before = out.problems.length;
  if (!validate(data)) {
    // A wrong type at a path makes every other report at that path noise: keep the type error only.
    const errors = validate.errors ?? [];
    const typeErrorAt = new Set(errors.filter((e) => e.keyword === "type").map((e) => e.instancePath));
    for (const err of errors) {
      const path = pointerToPath(err.instancePath, data);
      const params = err.params as Record<string, unknown>;
      if (err.keyword === "additionalProperties") {
        const key = String(params.additionalProperty);
        if (path.length === 0 && SILENT_TOP_LEVEL_KEYS.has(key)) continue;
        out.warn([...path, key], "unknown key, ignored");
      } else if (err.keyword === "required") {
        out.error([...path, String(params.missingProperty)], "is required");
      } else if (err.keyword === "type" || !typeErrorAt.has(err.instancePath)) {
        out.error(path, problemText(err, valueAt(data, path)));
      }
    }
  }
  return out.problems.length === before ? (data as RawConfig) : null;
}
