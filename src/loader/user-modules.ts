// Imports a user's module (graph, embed function, custom auth, http.app) by its source path: the
// server compiled the TypeScript ones at startup (compile-modules.ts) and handed their URLs to the
// HTTP thread and the workers; a file not in the map (plain JS) is imported as it is.
import { pathToFileURL } from "node:url";
import type { CompiledModules } from "./compile-modules.ts";

let compiled: CompiledModules = { urls: {}, errors: {} };

/** Called once per thread (HTTP thread, each worker) before it loads any user module. */
export function useCompiledModules(modules: CompiledModules): void {
  compiled = modules;
}

export async function importUserModule(filePath: string): Promise<Record<string, unknown>> {
  const failure = compiled.errors[filePath];
  if (failure !== undefined) throw new Error(`it does not compile: ${failure}`);
  return (await import(compiled.urls[filePath] ?? pathToFileURL(filePath).href)) as Record<string, unknown>;
}
