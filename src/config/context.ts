// What every section resolver needs: where relative paths start, where problems go, and the
// environment (process env overlaid with the config's own `env`) that templates and env fallbacks read.

import type { ProblemCollector } from "./errors.ts";

export interface ResolveContext {
  /** Directory of the config file; relative paths resolve against it. */
  readonly dir: string;
  readonly out: ProblemCollector;
  readonly env: Readonly<Record<string, string | undefined>>;
}
