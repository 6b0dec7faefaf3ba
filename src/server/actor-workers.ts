// How many actor worker threads a server starts when --workers is not given.
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

/** the actor workers to start: `requested` if given, else one per CPU (less one for a local database) */
export function actorWorkerCount(requested: number | undefined, databaseUri: string | undefined, cpus = availableParallelism()): number {
  if (requested !== undefined) return requested;
  if (databaseUri !== undefined && databaseIsLocal(databaseUri)) return Math.max(1, cpus - 1);
  return Math.max(1, cpus);
}
