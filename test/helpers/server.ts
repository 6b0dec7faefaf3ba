// Spawns a real Troupe server process (bin/troupe.js) on port 0 with a fresh data directory,
// exactly as a user would run it, and stops it (gracefully or with SIGKILL) at the end.
// TROUPE_TEST_BACKEND=postgres: every server without an explicit databaseUri stores into a fresh
// database of the test run's PostgreSQL (one per data dir: a restart on the same data dir finds
// the same data), dropped by cleanup(). `npm test` runs the server-spawning files once per backend
// (vitest.config.ts: the e2e and e2e-postgres projects). Tests that reach under the API use
// openServerStorage (the port, on either backend) or skip with TEST_BACKEND.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { StoragePort } from "../../src/storage/port.ts";

export const REPO = fileURLToPath(new URL("../..", import.meta.url));
export const TEST_CONFIG = join(REPO, "test/fixtures/graphs/service.json");

/** the storage backend spawned servers use in this test run (TROUPE_TEST_BACKEND; default LMDB) */
export const TEST_BACKEND: "lmdb" | "postgres" = process.env.TROUPE_TEST_BACKEND === "postgres" ? "postgres" : "lmdb";

export interface TestServer {
  url: string;
  dataDir: string;
  /** the server's --database-uri (undefined: LMDB in the data dir) */
  databaseUri: string | undefined;
  proc: ChildProcess;
  output(): string;
  /** graceful stop (SIGTERM) */
  stop(): Promise<void>;
  /** kill -9, keeping the data dir */
  kill(): Promise<void>;
  /** remove the data dir (after stop/kill) */
  cleanup(): void;
}

export interface StartOptions {
  /** `dev` (default: loopback, no auth, no rate limits) or `serve` (pass --host 127.0.0.1 in extraArgs) */
  command?: "dev" | "serve";
  config?: string;
  dataDir?: string;
  /** postgres://… passed as --database-uri (the data dir then keeps only compiled modules) */
  databaseUri?: string;
  workers?: number;
  env?: Record<string, string>;
  extraArgs?: string[];
  /** how long to wait for the listening line (default 30 s) */
  startTimeoutMs?: number;
}

/** the test backend's database of each data dir (TROUPE_TEST_BACKEND=postgres) */
const backendDatabases = new Map<string, Promise<{ uri: string; drop(): Promise<void> }>>();

function backendDatabaseOf(dataDir: string): Promise<{ uri: string; drop(): Promise<void> }> | undefined {
  if (TEST_BACKEND !== "postgres") return undefined;
  let db = backendDatabases.get(dataDir);
  if (db === undefined) {
    // loaded only here: it needs vitest's inject (the run's PostgreSQL server)
    db = import("./postgres.ts").then((m) => m.createTestDatabase());
    backendDatabases.set(dataDir, db);
  }
  return db;
}

export async function startTestServer(opts: StartOptions = {}): Promise<TestServer> {
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), "troupe-test-"));
  const databaseUri = opts.databaseUri ?? (await backendDatabaseOf(dataDir))?.uri;
  const args = [
    join(REPO, "bin/troupe.js"),
    opts.command ?? "dev",
    "--port",
    "0",
    "--config",
    opts.config ?? TEST_CONFIG,
    "--data-dir",
    dataDir,
    "--workers",
    String(opts.workers ?? 2),
    ...(databaseUri ? ["--database-uri", databaseUri] : []),
    ...(opts.extraArgs ?? []),
  ];
  const proc = spawn(process.execPath, args, { cwd: REPO, env: { ...process.env, ...opts.env }, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  proc.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  proc.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    const startTimeoutMs = opts.startTimeoutMs ?? 60_000;
    const timer = setTimeout(() => reject(new Error(`server did not start in ${startTimeoutMs / 1000} s:\n${out}`)), startTimeoutMs);
    const onData = () => {
      const m = /troupe listening on (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    proc.stdout!.on("data", onData);
    proc.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening:\n${out}`));
    });
  });
  const exited = new Promise<void>((r) => proc.once("exit", () => r()));
  return {
    url,
    dataDir,
    databaseUri,
    proc,
    output: () => out,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGTERM");
      await Promise.race([exited, new Promise((r) => setTimeout(r, 8_000))]);
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
      await exited;
    },
    async kill() {
      proc.kill("SIGKILL");
      await exited;
    },
    cleanup() {
      rmSync(dataDir, { recursive: true, force: true });
      const db = backendDatabases.get(dataDir);
      backendDatabases.delete(dataDir);
      void db?.then((d) => d.drop()).catch(() => undefined);
    },
  };
}

/**
 * The storage of a stopped (or killed) server, through the port on whichever backend it ran:
 * for tests that plant a state no request can reach (e.g. a record as a crash left it).
 */
export async function openServerStorage(server: Pick<TestServer, "dataDir" | "databaseUri">): Promise<StoragePort> {
  const { openStorage } = await import("../../src/storage/open.ts"); // lmdb-js and pg load only in the files that use this
  return openStorage({ dataDir: server.dataDir, databaseUri: server.databaseUri });
}
