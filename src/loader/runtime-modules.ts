// What the server compiles before it starts its worker threads: our worker entries (with
// everything they import from src/) and the user's modules (graphs and embed function for the
// workers, custom auth and http.app for the HTTP thread). Ours go to the compile cache bin/troupe.js
// chose (shared by every server of this install), the user's to the data directory (`modules/`).
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { compileModules, type CompiledModules } from "./compile-modules.ts";

const ACTOR_SHARD_ENTRY = fileURLToPath(new URL("../../workers/actor-shard.ts", import.meta.url));
const WEBHOOK_ENTRY = fileURLToPath(new URL("../../workers/webhook.ts", import.meta.url));
const SCHEMA_EXTRACT_ENTRY = fileURLToPath(new URL("../../workers/schema-extract.ts", import.meta.url));

export interface WorkerModules {
  /** URL of the compiled actor worker entry (Piscina `filename`) */
  actorShard: string;
  /** URL of the compiled webhook worker entry */
  webhook: string;
  /** URL of the compiled schema-extraction worker entry (src/schemas/) */
  schemaExtract: string;
  /** the user's graph / embed modules, for the workers' importUserModule */
  user: CompiledModules;
}

/**
 * Compiles entry files of Troupe's own code into `<compile cache>/<name>` (the install's cache that
 * bin/troupe.js names in TROUPE_COMPILE_CACHE), else into `fallbackDir`; returns each entry's URL.
 * Our code that does not compile is an error.
 */
export async function compileTroupeEntries(entries: readonly string[], name: string, fallbackDir: string): Promise<Record<string, string>> {
  const cache = process.env.TROUPE_COMPILE_CACHE;
  const built = await compileModules(entries, cache ? join(cache, name) : fallbackDir, { keepBuilds: cache ? 3 : 1 });
  const failed = Object.entries(built.errors);
  if (failed.length > 0) throw new Error(`troupe's own code does not compile: ${failed.map(([f, m]) => `${f}: ${m}`).join("; ")}`);
  return built.urls;
}

/** Compiles the worker entries and `userFiles`; a runtime that does not compile is a startup error. */
export async function compileWorkerModules(dataDir: string, userFiles: readonly string[]): Promise<WorkerModules> {
  const runtime = await compileTroupeEntries([ACTOR_SHARD_ENTRY, WEBHOOK_ENTRY, SCHEMA_EXTRACT_ENTRY], "runtime", join(dataDir, "modules", "runtime"));
  const user = await compileModules(userFiles, join(dataDir, "modules", "user"));
  return { actorShard: runtime[ACTOR_SHARD_ENTRY]!, webhook: runtime[WEBHOOK_ENTRY]!, schemaExtract: runtime[SCHEMA_EXTRACT_ENTRY]!, user };
}
