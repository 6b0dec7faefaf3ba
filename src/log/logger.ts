// The structured log of every thread: one pino logger per thread writing JSON lines (or, for
// `troupe dev`, readable lines) straight to stdout's file descriptor, so a worker's lines cost its
// own thread a write and never a message to the HTTP thread. Modules log through `componentLog`.
import pino, { type Logger } from "pino";
import { prettyLine } from "./pretty.ts";

export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export type LogFormat = "json" | "pretty";

export interface LogOptions {
  level: LogLevel;
  format: LogFormat;
}

export const DEFAULT_LOG_OPTIONS: LogOptions = { level: "info", format: "json" };

export function isLogLevel(v: unknown): v is LogLevel {
  return typeof v === "string" && (LOG_LEVELS as readonly string[]).includes(v);
}

/** Key/value fields of a line (ids, status, duration …). */
export type LogFields = Record<string, unknown>;

let options: LogOptions = DEFAULT_LOG_OPTIONS;
let threadName = "main";
let root: Logger | undefined;
/** bumped whenever the root logger is replaced: component loggers rebuild their child then */
let generation = 0;

function build(): Logger {
  // async writes (sonic-boom coalesces lines while a write is in flight); flushed on exit below
  const fd = pino.destination({ dest: 1, sync: false, minLength: 0 });
  flushOnExit(fd);
  const dest = options.format === "pretty" ? { write: (line: string) => void fd.write(prettyLine(line)) } : fd;
  return pino(
    {
      level: options.level,
      base: { thread: threadName },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    dest,
  );
}

let exitHooked = false;
const destinations: { flushSync(): void }[] = [];
function flushOnExit(d: { flushSync(): void }): void {
  destinations.push(d);
  if (exitHooked) return;
  exitHooked = true;
  process.once("exit", flushLogs);
}

/** Writes out every buffered line now (before exiting on a fatal error). */
export function flushLogs(): void {
  for (const d of destinations) {
    try {
      d.flushSync();
    } catch {
      // nothing left to write, or stdout is gone
    }
  }
}

/** Sets this thread's level and format (and its name in every line); later lines use them. */
export function configureLogging(o: Partial<LogOptions>, thread?: string): void {
  options = { ...options, ...o };
  if (thread !== undefined) threadName = thread;
  if (root) root.flush();
  root = undefined;
  generation++;
}

export function logOptions(): LogOptions {
  return options;
}

export function rootLogger(): Logger {
  return (root ??= build());
}

/** A module's logger: lines carry `component`; it follows configureLogging calls made after it was created. */
export interface ComponentLog {
  error(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  debug(msg: string, fields?: LogFields): void;
  /** whether lines of this level are written (skip building expensive fields otherwise) */
  enabled(level: Exclude<LogLevel, "silent">): boolean;
}

export function componentLog(component: string): ComponentLog {
  let child: Logger | undefined;
  let built = -1;
  const get = (): Logger => {
    if (built !== generation || child === undefined) {
      child = rootLogger().child({ component });
      built = generation;
    }
    return child;
  };
  return {
    error: (msg, fields) => get().error(errorFields(fields), msg),
    warn: (msg, fields) => get().warn(errorFields(fields), msg),
    info: (msg, fields) => get().info(fields ?? {}, msg),
    debug: (msg, fields) => get().debug(fields ?? {}, msg),
    enabled: (level) => get().isLevelEnabled(level),
  };
}

/** An Error in `err` is written as its type, message and stack. */
function errorFields(fields: LogFields | undefined): LogFields {
  if (!fields) return {};
  const err = fields.err;
  if (!(err instanceof Error)) return fields;
  return { ...fields, err: { type: err.name, message: err.message, stack: err.stack } };
}
