// Imports a user's module (graph, embed function) by its source path. In actor workers the main
// thread has compiled TypeScript entries ahead of time (compile-modules.ts) and handed over their
// URLs; on the main thread, which has tsx registered, the source path is imported as it is.
import { pathToFileURL } from "node:url";
import type { CompiledModules } from "./compile-modules.ts";

let compiled: CompiledModules = { urls: {}, errors: {} };

/** Called once by a worker before it loads any user module. */
export function useCompiledModules(modules: CompiledModules): void {
  compiled = modules;
}

export async function importUserModule(filePath: string): Promise<Record<string, unknown>> {
  const failure = compiled.errors[filePath];
  if (failure !== undefined) throw new Error(`it does not compile: ${failure}`);
  return (await import(compiled.urls[filePath] ?? pathToFileURL(filePath).href)) as Record<string, unknown>;
}
