// The BUILDING step of a revision: validate the config with loadConfig (the ConfigError message is
// the readable reason), then import-check the graphs in a child process (build-check.ts). Nothing
// is installed: the project must resolve its dependencies (its own node_modules or Troupe's).
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { ConfigError, loadConfig } from "../../config/index.ts";
import { OutputTail } from "../output-tail.ts";
import { RESULT_MARKER, type BuildCheckResult } from "./build-protocol.ts";

export interface BuildOptions {
  /** the revision's secrets, as env vars (config templates and graph modules may read them) */
  env: Record<string, string>;
  timeoutMs: number;
  signal?: AbortSignal;
}

const CHECK_ENTRY = fileURLToPath(new URL("./build-check.ts", import.meta.url));
const TSX_ESM = pathToFileURL(createRequire(import.meta.url).resolve("tsx/esm")).href;

export async function buildRevision(configPath: string, opts: BuildOptions): Promise<BuildCheckResult> {
  try {
    await loadConfig(configPath, { env: { ...process.env, ...opts.env } });
  } catch (err) {
    return { ok: false, message: err instanceof ConfigError ? err.message : `cannot load ${configPath}: ${(err as Error)?.message ?? String(err)}` };
  }
  return importCheck(configPath, opts);
}

function importCheck(configPath: string, opts: BuildOptions): Promise<BuildCheckResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["--import", TSX_ESM, CHECK_ENTRY, configPath], {
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
      const line = stdout.split("\n").reverse().find((l) => l.startsWith(RESULT_MARKER));
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
