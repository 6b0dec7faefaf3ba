// Child-process entry of the BUILDING step: loads the config and imports every graph module in a
// fresh Node process (with the revision's secrets in env), so a module that fails to import or an
// export that is not a graph fails the build, without loading user code into the control plane.
// Prints one line `TROUPE_BUILD_RESULT <json>` (BuildCheckResult) on stdout, then exits.
import { pathToFileURL } from "node:url";
import { loadConfig } from "../../config/index.ts";
import { RESULT_MARKER, type BuildCheckResult } from "./build-protocol.ts";

function looksLikeGraph(v: unknown): boolean {
  if (typeof v === "function") return true; // a graph factory: checked when the server calls it
  if (!v || typeof v !== "object") return false;
  const o = v as Record<string, unknown>;
  if (typeof o.stream === "function" && typeof o.getState === "function") return true; // compiled graph
  if (typeof o.compile === "function") return true; // StateGraph
  return "graph" in o && looksLikeGraph(o.graph); // createAgent wrapper
}

async function check(configPath: string): Promise<BuildCheckResult> {
  const config = await loadConfig(configPath);
  for (const [k, v] of Object.entries(config.env)) process.env[k] ??= v;
  for (const g of config.graphs) {
    let mod: Record<string, unknown>;
    try {
      mod = (await import(pathToFileURL(g.filePath).href)) as Record<string, unknown>;
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

const isEntry = process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href;
if (!isEntry) throw new Error("build-check.ts is a child-process entry; spawn it, do not import it");

const configPath = process.argv[2];
const result: BuildCheckResult = configPath
  ? await check(configPath).catch((err: unknown) => ({ ok: false as const, message: (err as Error)?.message ?? String(err) }))
  : { ok: false, message: "usage: build-check.ts <config path>" };
process.stdout.write(`\n${RESULT_MARKER}${JSON.stringify(result)}\n`, () => process.exit(0));
