// Resolves the module-path keys — `graphs`, `ui`, `auth.path` — into absolute, existing files
// (graphs and auth also into export names). Every bad entry is reported, not just the first.

import { resolveExistingFile, resolveImportRef } from "./import-ref.ts";
import type { ResolveContext } from "./context.ts";
import type { KeyPath } from "./errors.ts";
import type { ImportRef, RawConfig, ResolvedAuthConfig, ResolvedGraph } from "./types.ts";

/** Resolves an optional import string at `key`; reports and returns null when it is bad. */
export function optionalImportRef(spec: string | undefined, key: KeyPath, ctx: ResolveContext): ImportRef | null {
  if (spec === undefined) return null;
  const r = resolveImportRef(spec, ctx.dir);
  if (r.ok) return r.ref;
  ctx.out.error(key, r.problem);
  return null;
}

export function resolveGraphs(graphs: RawConfig["graphs"], ctx: ResolveContext): ResolvedGraph[] {
  const resolved: ResolvedGraph[] = [];
  for (const [graphId, spec] of Object.entries(graphs)) {
    if (graphId.trim() === "") {
      ctx.out.error(["graphs", graphId], "graph id must not be empty");
      continue;
    }
    const isString = typeof spec === "string";
    const key = isString ? ["graphs", graphId] : ["graphs", graphId, "path"];
    const ref = optionalImportRef(isString ? spec : spec.path, key, ctx);
    if (ref) resolved.push({ graphId, ...ref, description: isString ? null : (spec.description ?? null) });
  }
  return resolved;
}

export function resolveUi(ui: RawConfig["ui"], ctx: ResolveContext): Record<string, string> {
  const resolved: Record<string, string> = {};
  for (const [name, file] of Object.entries(ui ?? {})) {
    const r = resolveExistingFile(file, ctx.dir);
    if (r.ok) resolved[name] = r.filePath;
    else ctx.out.error(["ui", name], r.problem);
  }
  return resolved;
}

export function resolveAuth(auth: RawConfig["auth"], ctx: ResolveContext): ResolvedAuthConfig {
  return {
    path: optionalImportRef(auth?.path, ["auth", "path"], ctx),
    disableStudioAuth: auth?.disable_studio_auth ?? false,
    allowStudioOnServe: auth?.allow_studio_on_serve ?? false,
  };
}
