// The log settings a server starts with: LOG_LEVEL and LOG_JSON from the environment (as LangGraph
// Platform reads them) win over the config's `logging` section; `troupe dev` prints readable
// lines unless told otherwise, `troupe serve` JSON lines.
import type { ResolvedLoggingConfig } from "../config/types.ts";
import { isLogLevel, type LogLevel, type LogOptions } from "./logger.ts";

/** Python logging's names too (LangGraph Platform deployments set LOG_LEVEL=WARNING, …). */
const ALIASES: Record<string, LogLevel> = { warning: "warn", critical: "fatal", verbose: "debug", notset: "trace", off: "silent" };

export interface ServerLogOptions extends LogOptions {
  requestsPerSecond: number;
  /** settings given but not understood (reported once the log is set up) */
  problems: string[];
}

export function resolveLogOptions(config: ResolvedLoggingConfig, env: NodeJS.ProcessEnv, dev: boolean): ServerLogOptions {
  const problems: string[] = [];
  let level: LogLevel = config.level ?? "info";
  const rawLevel = env.LOG_LEVEL?.trim().toLowerCase();
  if (rawLevel) {
    const l = ALIASES[rawLevel] ?? rawLevel;
    if (isLogLevel(l)) level = l;
    else problems.push(`LOG_LEVEL=${JSON.stringify(env.LOG_LEVEL)} is not a level (fatal, error, warn, info, debug, trace, silent); using ${level}`);
  }
  let format = config.format ?? (dev ? "pretty" : "json");
  const rawJson = env.LOG_JSON?.trim().toLowerCase();
  if (rawJson === "true" || rawJson === "1") format = "json";
  else if (rawJson === "false" || rawJson === "0") format = "pretty";
  return { level, format, requestsPerSecond: config.requestsPerSecond, problems };
}
