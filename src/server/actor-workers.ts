// How many actor worker threads a server starts when --workers is not given, and their young generation.
/*
 * One per CPU, except when the PostgreSQL server runs on this machine (a loopback host or a Unix
 * socket): then one CPU is left to it. Its backends serve every run's statements on the same
 * cores, and a worker per core oversubscribed them: on the 2-core bench machine, with PostgreSQL
 * local, 1 worker against 2 served wait-c64 +5..+26% runs/s at −25..−40% CPU per run (5 alternated
 * pairs), and wait-c1 p50, stream first event and enqueue-1000 were faster too (bench/RESULTS.md,
 * session 24). With the database elsewhere the cores are all Troupe's.
 */
import { availableParallelism } from "node:os";
import { addressKind, isLoopbackName } from "../util/address-kind.ts";

/** whether `databaseUri` names a PostgreSQL server on this machine */
export function databaseIsLocal(databaseUri: string): boolean {
  let url: URL;
  try {
    url = new URL(databaseUri);
  } catch {
    return false;
  }
  // libpq-style `?host=/path` is a Unix socket directory, as is an empty host (`postgres:///db`)
  const host = url.searchParams.get("host") ?? decodeURIComponent(url.hostname);
  if (host === "" || host.startsWith("/")) return true;
  const name = host.toLowerCase().replace(/\.$/, "");
  return addressKind(name) === "loopback" || isLoopbackName(name);
}

/*
 * Each actor worker's V8 young generation (Piscina `resourceLimits.maxYoungGenerationSizeMb`; a
 * third of it is one semi-space). A run's objects live as long as the run: on LMDB a wait-c64 run
 * takes ~80 ms, on PostgreSQL ~200 ms (its statements' round trips). With 24 MB (8 MB semi-spaces:
 * a scavenge every ~11 runs) a PostgreSQL run outlives several scavenges, so most of what it holds
 * is copied and promoted: scavenges took ~0.7 ms of pause per run and V8's helper threads ~1 ms.
 * 96 MB (32 MB semi-spaces) cut Troupe's CPU per run on PostgreSQL by ~12% and raised wait-c64
 * 286–301 → 319–349 runs/s (3 alternated rounds, bench/RESULTS.md session 27); on LMDB it was level,
 * so LMDB keeps 24 MB (session 10: ~16 MB less resident per worker than V8's default once grown
 * under load, throughput within noise; 12 MB cost 10-15%), and an idle server shrinks either back.
 * Checked where it lands by test/e2e-worker-limits.test.ts (a graph reads its worker's limits).
 */
export function actorWorkerYoungGenerationMb(databaseUri: string | undefined): number {
  return databaseUri === undefined ? 24 : 96;
}

/** the actor workers to start: `requested` if given, else one per CPU (less one for a local database) */
export function actorWorkerCount(requested: number | undefined, databaseUri: string | undefined, cpus = availableParallelism()): number {
  if (requested !== undefined) return requested;
  if (databaseUri !== undefined && databaseIsLocal(databaseUri)) return Math.max(1, cpus - 1);
  return Math.max(1, cpus);
}
