// Command-line errors shared by the `troupe` commands: a bad flag is reported as one line and exit
// code 2, not as a stack trace.

/** A bad command line (a flag's value out of range, a missing argument). */
export class UsageError extends Error {}

/** parseArgs' own errors (unknown option, missing value, stray positional) are usage errors too. */
export function isParseArgsError(err: unknown): err is Error {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && code.startsWith("ERR_PARSE_ARGS_");
}

export const wantsHelp = (args: readonly string[]): boolean => args.includes("--help") || args.includes("-h");
