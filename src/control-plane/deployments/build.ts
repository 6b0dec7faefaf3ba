// The BUILDING step of a revision: validate the config with loadConfig (the ConfigError message is
// the readable reason), then import-check the graphs in a child process (build-check.ts). Nothing
// is installed: the project must resolve its dependencies (its own node_modules or Troupe's).
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ConfigError, loadConfig } from "../../config/index.ts";
import { compileTroupeEntries } from "../../loader/runtime-modules.ts";
import { OutputTail } from "../output-tail.ts";
import { CHILD_FLAG, RESULT_MARKER, type BuildCheckResult } from "./build-check-messages.ts";

export interface BuildOptions {
  /** the revision's secrets, as env vars (config templates and graph modules may read them) */
  env: Record<string, string>;
  timeoutMs: number;
  signal?: AbortSignal;
  /** the organization's projects directory: the config and every file it names must be inside */
  root: string;
}

const CHECK_SOURCE = fileURLToPath(new URL("./build-check.ts", import.meta.url));
let checkEntry: Promise<string> | undefined;
/**
 * Without the install's compile cache (tests import this module directly): a temp dir of this
 * checkout's own. One shared by every checkout on the machine kept only the newest build, so two
 * checkouts building at once removed each other's entry before its child process started.
 */
const FALLBACK_DIR = join(tmpdir(), `troupe-build-check-entry-${createHash("sha256").update(CHECK_SOURCE).digest("hex").slice(0, 12)}`);

/** build-check.ts compiled like the rest of Troupe (no thread or child runs tsx), once per process. */
function compiledCheckEntry(): Promise<string> {
  checkEntry ??= compileTroupeEntries([CHECK_SOURCE], "build-check", FALLBACK_DIR).then((urls) => fileURLToPath(urls[CHECK_SOURCE]!));
  checkEntry.catch(() => (checkEntry = undefined)); // a later build tries again
  return checkEntry;
}

export async function buildRevision(configPath: string, opts: BuildOptions): Promise<BuildCheckResult> {
  try {
    await loadConfig(configPath, { env: { ...process.env, ...opts.env }, root: opts.root });
  } catch (err) {
    return { ok: false, message: err instanceof ConfigError ? err.message : `cannot load ${configPath}: ${(err as Error)?.message ?? String(err)}` };
  }
  let entry: string;
  try {
    entry = await compiledCheckEntry();
  } catch (err) {
    return { ok: false, message: (err as Error).message };
  }
  return importCheck(entry, configPath, opts);
}

function importCheck(entry: string, configPath: string, opts: BuildOptions): Promise<BuildCheckResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [entry, CHILD_FLAG, configPath], {
      cwd: dirname(configPath),
      env: { ...process.env, ...opts.env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    const tail = new OutputTail(15);
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
      if (stdout.length > 1 << 20) stdout = stdout.slice(-(1 << 16));
    });
    child.stderr.on("data", (d: Buffer) => tail.push(d));
    let reason: string | null = null;
    const stop = (why: string) => {
      reason ??= why;
      child.kill("SIGKILL");
    };
    const timer = setTimeout(() => stop(`the graph import check did not finish within ${Math.round(opts.timeoutMs / 1000)} s`), opts.timeoutMs);
    const onAbort = () => stop("build cancelled");
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    child.once("error", (err) => stop(`cannot start the graph import check: ${err.message}`));
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      opts.signal?.removeEventListener("abort", onAbort);
      if (reason) return resolve({ ok: false, message: reason });
      const line = stdout
        .split("\n")
        .reverse()
        .find((l) => l.startsWith(RESULT_MARKER));
      if (line) {
        try {
          return resolve(JSON.parse(line.slice(RESULT_MARKER.length)) as BuildCheckResult);
        } catch {
          /* fall through */
        }
      }
      const out = tail.text();
      resolve({ ok: false, message: `the graph import check exited (${signal ?? `code ${code}`}) without a result${out ? `:\n${out}` : ""}` });
    });
  });
}
