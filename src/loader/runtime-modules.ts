// What the server compiles before it starts its worker threads: our two worker entries (with
// everything they import from src/) and the user's modules (graphs and embed function for the
// workers, custom auth and http.app for the HTTP thread). Ours go to the compile cache bin/troupe.js
// chose (shared by every server of this install), the user's to the data directory (`modules/`).
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { compileModules, type CompiledModules } from "./compile-modules.ts";

const ACTOR_SHARD_ENTRY = fileURLToPath(new URL("../../workers/actor-shard.ts", import.meta.url));
const WEBHOOK_ENTRY = fileURLToPath(new URL("../../workers/webhook.ts", import.meta.url));

export interface WorkerModules {
  /** URL of the compiled actor worker entry (Piscina `filename`) */
  actorShard: string;
  /** URL of the compiled webhook worker entry */
  webhook: string;
  /** the user's graph / embed modules, for the workers' importUserModule */
  user: CompiledModules;
}

/** Compiles the worker entries and `userFiles`; a runtime that does not compile is a startup error. */
export async function compileWorkerModules(dataDir: string, userFiles: readonly string[]): Promise<WorkerModules> {
  const cache = process.env.TROUPE_COMPILE_CACHE;
  const runtimeDir = cache ? join(cache, "runtime") : join(dataDir, "modules", "runtime");
  const runtime = await compileModules([ACTOR_SHARD_ENTRY, WEBHOOK_ENTRY], runtimeDir, { keepBuilds: cache ? 3 : 1 });
  const failed = Object.entries(runtime.errors);
  if (failed.length > 0) throw new Error(`troupe's worker code does not compile: ${failed.map(([f, m]) => `${f}: ${m}`).join("; ")}`);
  const user = await compileModules(userFiles, join(dataDir, "modules", "user"));
  return { actorShard: runtime.urls[ACTOR_SHARD_ENTRY]!, webhook: runtime.urls[WEBHOOK_ENTRY]!, user };
}
