// Startup: imports the module `auth.path` names (TypeScript compiled at startup, src/loader/),
// checks its export is an SDK `Auth` instance (it has `~handlerCache`) and builds the runtime.
// Every failure is a ConfigError naming `auth.path`, so the server refuses to start.
import { ConfigError, type ImportRef } from "../config/index.ts";
import { AuthRuntime, type AuthRuntimeOptions } from "./runtime.ts";
import type { AuthHandlerCache } from "./types.ts";
import { importUserModule } from "../loader/user-modules.ts";
import { componentLog } from "../log/logger.ts";

const authWarn = (m: string) => componentLog("auth").warn(m);

const EVENT_KEY = /^(\*|threads|assistants|crons|store)(:(\*|[a-z_]+))?$/;

export interface LoadAuthOptions extends AuthRuntimeOptions {
  /** config file, named in error messages */
  configPath: string;
  warn?: (message: string) => void;
}

export async function loadAuth(ref: ImportRef, opts: LoadAuthOptions): Promise<AuthRuntime> {
  const fail = (message: string, cause?: unknown): never => {
    throw new ConfigError(opts.configPath, [{ key: "auth.path", message }], { cause });
  };
  let mod: Record<string, unknown> = {};
  try {
    mod = await importUserModule(ref.filePath);
  } catch (err) {
    fail(`could not import ${ref.filePath}: ${err instanceof Error ? err.message : String(err)}`, err);
  }
  const exported = mod[ref.exportName];
  if (exported === undefined) {
    fail(`${ref.filePath} has no export "${ref.exportName}" (exports: ${Object.keys(mod).join(", ") || "none"})`);
  }
  const cache = typeof exported === "object" && exported !== null ? (exported as { "~handlerCache"?: unknown })["~handlerCache"] : undefined;
  if (typeof cache !== "object" || cache === null) {
    fail(`export "${ref.exportName}" of ${ref.filePath} is not an Auth instance: create it with \`new Auth()\` from "@langchain/langgraph-sdk/auth"`);
  }
  const handlers = cache as AuthHandlerCache;
  if (handlers.authenticate !== undefined && typeof handlers.authenticate !== "function") fail("the Auth object's authenticate handler is not a function");
  for (const [key, fn] of Object.entries(handlers.callbacks ?? {})) {
    if (typeof fn !== "function") fail(`the Auth object's handler for "${key}" is not a function`);
    if (!EVENT_KEY.test(key)) (opts.warn ?? authWarn)(`auth: handler registered for unknown event "${key}" will never run`);
  }
  if (!handlers.authenticate) {
    (opts.warn ?? authWarn)("auth: the Auth object has no authenticate handler, so no request is authenticated or authorized");
  }
  return new AuthRuntime(handlers, { studioHeader: opts.studioHeader });
}
