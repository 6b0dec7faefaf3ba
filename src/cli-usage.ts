// Command-line errors shared by the `troupe` commands: a bad flag is reported as one line and exit
// code 2, not as a stack trace.
import { TrustedProxies } from "./ratelimit/client-ip.ts";

/** A bad command line (a flag's value out of range, a missing argument). */
export class UsageError extends Error {}

/** parseArgs' own errors (unknown option, missing value, stray positional) are usage errors too. */
export function isParseArgsError(err: unknown): err is Error {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && code.startsWith("ERR_PARSE_ARGS_");
}

export const wantsHelp = (args: readonly string[]): boolean => args.includes("--help") || args.includes("-h");

/** `--trusted-proxies` (else $TROUPE_TRUSTED_PROXIES): undefined when none; a malformed entry is a usage error. */
export function trustedProxiesFrom(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): TrustedProxies | undefined {
  const raw = flag ?? env.TROUPE_TRUSTED_PROXIES;
  if (raw === undefined || raw.trim() === "") return undefined;
  try {
    return TrustedProxies.parse(raw);
  } catch (err) {
    throw new UsageError(`--trusted-proxies: ${(err as Error).message}`);
  }
}
