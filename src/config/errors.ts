// ConfigError and the collector that gathers every problem of one load, so a bad config file is
// reported in one go, each line naming the file, the key path and what is wrong.

export type KeyPath = readonly (string | number)[];

export interface ConfigProblem {
  /** Dotted key path, e.g. `webhooks.url.allowed_ports[1]`; "" for the file as a whole. */
  readonly key: string;
  readonly message: string;
}

const IDENT = /^[A-Za-z_$][\w$-]*$/;

/** `["webhooks","url","allowed_ports",1]` → `webhooks.url.allowed_ports[1]`. */
export function formatKeyPath(path: KeyPath): string {
  let out = "";
  for (const seg of path) {
    if (typeof seg === "number") out += `[${seg}]`;
    else if (IDENT.test(seg)) out += out === "" ? seg : `.${seg}`;
    else out += `[${JSON.stringify(seg)}]`;
  }
  return out;
}

/** Short rendering of an offending value for messages (`"yes"`, `3`, `an object`). */
export function describeValue(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return "an object";
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

export function formatProblem(file: string, problem: ConfigProblem): string {
  return problem.key === "" ? `${file}: ${problem.message}` : `${file}: ${problem.key}: ${problem.message}`;
}

export class ConfigError extends Error {
  /** The config file as the caller named it. */
  readonly file: string;
  readonly problems: readonly ConfigProblem[];

  constructor(file: string, problems: readonly ConfigProblem[], opts: { cause?: unknown } = {}) {
    const lines = problems.map((p) => formatProblem(file, p));
    const message = lines.length === 1 ? lines[0] : `${file}: ${lines.length} problems in the config file:\n  ${lines.join("\n  ")}`;
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = "ConfigError";
    this.file = file;
    this.problems = problems;
  }
}

/** Accumulates problems and warnings during one load. */
export class ProblemCollector {
  readonly problems: ConfigProblem[] = [];
  readonly warnings: ConfigProblem[] = [];

  constructor(readonly file: string) {}

  error(path: KeyPath, message: string): void {
    this.problems.push({ key: formatKeyPath(path), message });
  }

  warn(path: KeyPath, message: string): void {
    this.warnings.push({ key: formatKeyPath(path), message });
  }

  /** Throws a ConfigError listing everything collected so far, if anything. */
  throwIfAny(): void {
    if (this.problems.length > 0) throw new ConfigError(this.file, [...this.problems]);
  }

  warningLines(): string[] {
    return this.warnings.map((w) => formatProblem(this.file, w));
  }
}
