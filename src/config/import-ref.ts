// Parses `"./file.ts:exportName"` import strings and resolves them against the config directory.
// Unlike upstream (which requires the `:`), a string without `:` means the module's `default` export.

import { statSync } from "node:fs";
import path from "node:path";
import type { ImportRef } from "./types.ts";

const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

export type ImportRefResult = { ok: true; ref: ImportRef } | { ok: false; problem: string };

/** Splits at the last `:`; the part after it must be a JS identifier. */
export function parseImportString(spec: string): { file: string; exportName: string } | { problem: string } {
  const colon = spec.lastIndexOf(":");
  if (colon < 0) return { file: spec, exportName: "default" };
  const file = spec.slice(0, colon);
  const exportName = spec.slice(colon + 1);
  if (file === "") return { problem: `must be "path:export" or "path" — got ${JSON.stringify(spec)} (path is empty)` };
  if (!IDENTIFIER.test(exportName)) {
    return { problem: `must be "path:export" with export an identifier, or "path" for the default export — got ${JSON.stringify(spec)}` };
  }
  return { file, exportName };
}

/** Resolves a file path against `baseDir` and checks it names an existing regular file. */
export function resolveExistingFile(file: string, baseDir: string): { ok: true; filePath: string } | { ok: false; problem: string } {
  const filePath = path.resolve(baseDir, file);
  if (filePath.endsWith(".py")) return { ok: false, problem: `Python modules are not supported (${filePath})` };
  try {
    if (statSync(filePath).isFile()) return { ok: true, filePath };
    return { ok: false, problem: `not a file: ${filePath}` };
  } catch {
    return { ok: false, problem: `file not found: ${filePath}` };
  }
}

export function resolveImportRef(spec: string, baseDir: string): ImportRefResult {
  const parsed = parseImportString(spec);
  if ("problem" in parsed) return { ok: false, problem: parsed.problem };
  const file = resolveExistingFile(parsed.file, baseDir);
  if (!file.ok) return file;
  return { ok: true, ref: { filePath: file.filePath, exportName: parsed.exportName } };
}
