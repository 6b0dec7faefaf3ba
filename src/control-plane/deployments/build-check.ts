// Child-process entry of the BUILDING step: loads the config and imports every graph module in a
// fresh Node process (with the revision's secrets in env), so a module that fails to compile or
// import, or an export that is not a graph, fails the build, without loading user code into the
// control plane. The graphs are compiled and imported exactly as `troupe serve` does it
// (src/loader/), into a temporary directory. Prints one line `TROUPE_BUILD_RESULT <json>`
// (BuildCheckResult) on stdout, then exits.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../config/index.ts";
import { compileModules } from "../../loader/compile-modules.ts";
import { importUserModule, useCompiledModules } from "../../loader/user-modules.ts";
import { CHILD_FLAG, RESULT_MARKER, type BuildCheckResult } from "./build-check-messages.ts";
import { registerGraphLogger } from "../../log/graph-logger.ts";

function looksLikeGraph(v: unknown): boolean {
  if (typeof v === "function") return true; // a graph factory: checked when the server calls it
  if (!v || typeof v !== "object") return false;
  const o = v as Record<string, unknown>;
  if (typeof o.stream === "function" && typeof o.getState === "function") return true; // compiled graph
  if (typeof o.compile === "function") return true; // StateGraph
  return "graph" in o && looksLikeGraph(o.graph); // createAgent wrapper
}

async function check(configPath: string, buildDir: string): Promise<BuildCheckResult> {
  const config = await loadConfig(configPath);
  for (const [k, v] of Object.entries(config.env)) process.env[k] ??= v;
  useCompiledModules(
    await compileModules(
      config.graphs.map((g) => g.filePath),
      buildDir,
    ),
  );
  registerGraphLogger(); // a graph calling getLogger() at import loads as it does on the server
  for (const g of config.graphs) {
    let mod: Record<string, unknown>;
    try {
      mod = await importUserModule(g.filePath);
    } catch (err) {
      return { ok: false, message: `graph "${g.graphId}": importing ${g.filePath} failed: ${(err as Error)?.message ?? String(err)}` };
    }
    if (!(g.exportName in mod)) return { ok: false, message: `graph "${g.graphId}": ${g.filePath} has no export "${g.exportName}"` };
    const value: unknown = await mod[g.exportName];
    if (!looksLikeGraph(value)) {
      return { ok: false, message: `graph "${g.graphId}": export "${g.exportName}" of ${g.filePath} is not a LangGraph graph, StateGraph or graph factory` };
    }
  }
  return { ok: true, graphs: config.graphs.map((g) => g.graphId) };
}

// Spawned as `node <compiled build-check> --troupe-build-check <config path>` (build.ts); the flag
// says so even though the compiled file's import.meta.url names this source file.
if (process.argv[2] !== CHILD_FLAG) throw new Error("build-check.ts is a child-process entry; spawn it, do not import it");

const configPath = process.argv[3];
const buildDir = mkdtempSync(join(tmpdir(), "troupe-build-check-"));
const result: BuildCheckResult = configPath
  ? await check(configPath, buildDir).catch((err: unknown) => ({ ok: false as const, message: (err as Error)?.message ?? String(err) }))
  : { ok: false, message: "usage: build-check.ts <config path>" };
rmSync(buildDir, { recursive: true, force: true });
process.stdout.write(`\n${RESULT_MARKER}${JSON.stringify(result)}\n`, () => process.exit(0));
