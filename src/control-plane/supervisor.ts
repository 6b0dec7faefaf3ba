// Runs deployment servers as child processes (`node bin/troupe.js serve …`), one per deployment
// key: start waits until the server printed its listening line AND answered GET /ok with 200;
// stop drains it (SIGTERM, SIGKILL after a timeout); a server that exits without being asked is
// restarted with exponential backoff. Knows nothing of revisions: callers get events.
import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream, readFileSync, type WriteStream } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";
import { OutputTail } from "./output-tail.ts";
import { componentLog } from "../log/logger.ts";
import { urlHostOf } from "../config/runtime-defaults.ts";

export interface ServerSpec {
  /** one server per key (the deployment id) */
  key: string;
  configPath: string;
  host: string;
  port: number;
  dataDir: string;
  /** added to the control plane's own environment (secrets) */
  env: Record<string, string>;
  /** more `serve` flags (e.g. --workers, --rate-limit) */
  extraArgs: readonly string[];
  /** stdout and stderr of the server are appended here */
  logFile?: string;
}

export interface SupervisorOptions {
  /** `bin/troupe.js` of this checkout by default */
  binPath?: string;
  /** how long a starting server has to answer GET /ok (default 60 s) */
  readyTimeoutMs?: number;
  /** SIGKILL a draining server after this long (default 20 s: the server's 10 s grace + margin) */
  stopTimeoutMs?: number;
  /** first restart delay after a crash (default 500 ms), doubled per consecutive crash */
  backoffInitialMs?: number;
  /** longest restart delay (default 30 s) */
  backoffMaxMs?: number;
  /** a server up this long resets the backoff (default 60 s) */
  backoffResetMs?: number;
  /** a crashed server is back (after a restart became ready) */
  onRestarted?(key: string, pid: number): void;
  /** a supervised server exited without being asked */
  onCrash?(key: string, reason: string): void;
  /** the pid serving a key changed (null = none) */
  onPid?(key: string, pid: number | null): void;
  log?(message: string): void;
}

type Resolved = Required<Omit<SupervisorOptions, "onRestarted" | "onCrash" | "onPid" | "log">> &
  Pick<SupervisorOptions, "onRestarted" | "onCrash" | "onPid"> & { log(m: string): void };

/** The server did not come up; the message says why (exit code and last output lines, or timeout). */
export class ServerStartError extends Error {
  override name = "ServerStartError";
}

interface Managed {
  spec: ServerSpec;
  child: ChildProcess | null;
  exited: Promise<void>;
  state: "starting" | "up" | "backoff" | "stopping";
  tail: OutputTail;
  consecutiveCrashes: number;
  upSince: number;
  timer: NodeJS.Timeout | null;
}

const ORPHAN_GUARD = pathToFileURL(fileURLToPath(new URL("./orphan-guard.mjs", import.meta.url))).href;
const DEFAULT_BIN = fileURLToPath(new URL("../../bin/troupe.js", import.meta.url));
const LISTENING = /troupe listening on (http:\/\/\S+)/;

export class Supervisor {
  private readonly o: Resolved;
  private readonly servers = new Map<string, Managed>();
  private closing = false;

  constructor(opts: SupervisorOptions = {}) {
    this.o = {
      binPath: opts.binPath ?? DEFAULT_BIN,
      readyTimeoutMs: opts.readyTimeoutMs ?? 60_000,
      stopTimeoutMs: opts.stopTimeoutMs ?? 20_000,
      backoffInitialMs: opts.backoffInitialMs ?? 500,
      backoffMaxMs: opts.backoffMaxMs ?? 30_000,
      backoffResetMs: opts.backoffResetMs ?? 60_000,
      onRestarted: opts.onRestarted,
      onCrash: opts.onCrash,
      onPid: opts.onPid,
      log: opts.log ?? ((m) => componentLog("control-plane").info(m)),
    };
  }

  /** pid of the server for key while it is up (answered /ok), else undefined */
  pid(key: string): number | undefined {
    const m = this.servers.get(key);
    return m?.state === "up" ? m.child?.pid : undefined;
  }

  /** a server for key is supervised (up, starting or waiting to restart) */
  has(key: string): boolean {
    return this.servers.has(key);
  }

  keys(): string[] {
    return [...this.servers.keys()];
  }

  /**
   * Starts the server for spec.key and resolves once GET /ok answered 200; from then on a crash
   * restarts it. Rejects with ServerStartError when it does not come up; with `keepTrying` it is
   * then retried with backoff like a crashed server (startup relaunch), otherwise forgotten.
   */
  async start(spec: ServerSpec, opts: { keepTrying?: boolean } = {}): Promise<number> {
    if (this.closing) throw new ServerStartError("the control plane is shutting down");
    if (this.servers.has(spec.key)) throw new Error(`a server for ${spec.key} is already supervised; stop it first`);
    const m: Managed = {
      spec,
      child: null,
      exited: Promise.resolve(),
      state: "starting",
      tail: new OutputTail(20),
      consecutiveCrashes: 0,
      upSince: 0,
      timer: null,
    };
    this.servers.set(spec.key, m);
    try {
      return await this.launch(m);
    } catch (err) {
      if (opts.keepTrying && this.servers.get(spec.key) === m && m.state === "starting") this.scheduleRestart(m, (err as Error).message);
      else if (this.servers.get(spec.key) === m) this.servers.delete(spec.key);
      throw err;
    }
  }

  /** Drains the server (SIGTERM: running runs get its grace period, queued runs stay in its data dir). */
  async stop(key: string): Promise<void> {
    const m = this.servers.get(key);
    if (!m) return;
    m.state = "stopping";
    if (m.timer) clearTimeout(m.timer);
    await this.terminate(m);
    if (this.servers.get(key) === m) this.servers.delete(key);
    this.o.onPid?.(key, null);
  }

  /** Stops every server; no server starts afterwards. */
  async stopAll(): Promise<void> {
    this.closing = true;
    await Promise.all(this.keys().map((k) => this.stop(k)));
  }

  private async terminate(m: Managed): Promise<void> {
    const child = m.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGTERM");
    const killed = await Promise.race([m.exited.then(() => false), sleep(this.o.stopTimeoutMs).then(() => true)]);
    if (killed) {
      this.o.log(`${m.spec.key}: server did not exit ${this.o.stopTimeoutMs} ms after SIGTERM; killing it`);
      child.kill("SIGKILL");
      await m.exited;
    }
  }

  /** Spawns the server and waits until it is ready; kills it again when it is not. */
  private async launch(m: Managed): Promise<number> {
    const { spec } = m;
    const args = [
      "--import",
      ORPHAN_GUARD,
      this.o.binPath,
      "serve",
      "--config",
      spec.configPath,
      "--host",
      spec.host,
      "--port",
      String(spec.port),
      "--data-dir",
      spec.dataDir,
      ...spec.extraArgs,
    ];
    const child = spawn(process.execPath, args, { env: { ...process.env, ...spec.env }, stdio: ["ignore", "pipe", "pipe", "ipc"] });
    m.child = child;
    m.state = "starting";
    m.tail = new OutputTail(20);
    const log: WriteStream | null = spec.logFile ? createWriteStream(spec.logFile, { flags: "a" }) : null;
    log?.on("error", () => undefined);
    log?.write(`--- ${new Date().toISOString()} starting pid ${child.pid ?? "?"}: serve --port ${spec.port}\n`);
    for (const s of [child.stdout!, child.stderr!]) {
      s.on("data", (d: Buffer) => {
        m.tail.push(d);
        log?.write(d);
      });
    }
    m.exited = new Promise((resolve) => {
      child.once("exit", (code, signal) => {
        log?.end(`--- exited (${signal ?? `code ${code}`})\n`);
        resolve();
        this.onExit(m, child, code, signal);
      });
    });
    child.once("error", (err) => m.tail.push(`spawn failed: ${err.message}\n`));
    try {
      await this.waitReady(m, child);
    } catch (err) {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await m.exited;
      throw err;
    }
    m.state = "up";
    m.upSince = Date.now();
    this.o.onPid?.(spec.key, child.pid!);
    return child.pid!;
  }

  private waitReady(m: Managed, child: ChildProcess): Promise<void> {
    const { host, port } = m.spec;
    const okUrl = `http://${urlHostOf(host)}:${port}/ok`;
    return new Promise((resolve, reject) => {
      let done = false;
      let seen = "";
      const finish = (err?: Error) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        child.stdout!.off("data", onData);
        child.off("exit", onExit);
        if (err) reject(err);
        else resolve();
      };
      const timer = setTimeout(() => {
        const out = m.tail.text(10);
        finish(
          new ServerStartError(
            `the deployment server did not answer GET /ok within ${Math.round(this.o.readyTimeoutMs / 1000)} s${out ? `; last output:\n${out}` : ""}`,
          ),
        );
      }, this.o.readyTimeoutMs);
      const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
        // let the last output chunks arrive before quoting them
        setImmediate(() => {
          const out = m.tail.text(12);
          finish(new ServerStartError(`the deployment server exited (${signal ?? `code ${code}`}) before answering GET /ok${out ? `:\n${out}` : ""}`));
        });
      };
      const onData = (d: Buffer) => {
        seen += d.toString();
        if (!LISTENING.test(seen)) {
          if (seen.length > 65_536) seen = seen.slice(-4096);
          return;
        }
        child.stdout!.off("data", onData);
        void (async () => {
          while (!done) {
            try {
              const res = await fetch(okUrl, { signal: AbortSignal.timeout(2_000) });
              await res.arrayBuffer();
              if (res.status === 200) return finish();
            } catch {
              /* not answering yet */
            }
            await sleep(100);
          }
        })();
      };
      child.stdout!.on("data", onData);
      child.on("exit", onExit);
    });
  }

  private onExit(m: Managed, child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (m.child !== child || m.state !== "up" || this.servers.get(m.spec.key) !== m) return;
    const what = `server pid ${child.pid} exited unexpectedly (${signal ?? `code ${code}`})`;
    const out = m.tail.text(5);
    this.o.log(`${m.spec.key}: ${what}${out ? `; last output:\n${out}` : ""}`);
    this.o.onCrash?.(m.spec.key, what);
    this.o.onPid?.(m.spec.key, null);
    if (Date.now() - m.upSince >= this.o.backoffResetMs) m.consecutiveCrashes = 0;
    this.scheduleRestart(m, what);
  }

  private scheduleRestart(m: Managed, reason: string): void {
    const delay = Math.min(this.o.backoffMaxMs, this.o.backoffInitialMs * 2 ** m.consecutiveCrashes);
    m.consecutiveCrashes++;
    m.state = "backoff";
    this.o.log(`${m.spec.key}: restarting in ${delay} ms (attempt ${m.consecutiveCrashes}) after: ${reason.split("\n")[0]}`);
    m.timer = setTimeout(() => {
      m.timer = null;
      if (this.servers.get(m.spec.key) !== m || m.state !== "backoff") return;
      this.launch(m).then(
        (pid) => {
          this.o.log(`${m.spec.key}: restarted, pid ${pid}`);
          this.o.onRestarted?.(m.spec.key, pid);
        },
        (err: Error) => {
          if (this.servers.get(m.spec.key) === m && m.state === "starting") this.scheduleRestart(m, err.message);
        },
      );
    }, delay);
  }
}

/**
 * After a control-plane crash the previous server of a deployment may still be draining (its
 * orphan guard SIGTERMs it when our IPC channel closes). Waits for it, or ends it, before a new
 * server takes the port and data dir. Only a live process whose command line names `marker`
 * (the deployment's data dir) is touched; without /proc (non-Linux) nothing is done.
 */
export async function reapStaleServer(pid: number, marker: string, timeoutMs: number): Promise<void> {
  const matches = (): boolean => {
    try {
      process.kill(pid, 0);
    } catch {
      return false;
    }
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").includes(marker);
    } catch {
      return false;
    }
  };
  if (!matches()) return;
  process.kill(pid, "SIGTERM");
  const deadline = Date.now() + timeoutMs;
  while (matches() && Date.now() < deadline) await sleep(100);
  if (matches()) process.kill(pid, "SIGKILL");
  while (matches()) await sleep(50);
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
