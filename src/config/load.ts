// loadConfig: read → validate against the compiled schema → resolve paths, env and templates →
// deep-freeze. Any problem throws one ConfigError listing them all (file, key path, what is wrong).

import path from "node:path";
import { ProblemCollector } from "./errors.ts";
import { deepFreeze } from "./freeze.ts";
import { readJsonFile } from "./json-file.ts";
import { resolveEnvBlock } from "./resolve-env.ts";
import { resolveAuth, resolveGraphs, resolveUi } from "./resolve-graphs.ts";
import { resolveHttp } from "./resolve-http.ts";
import { resolveCheckpointer, resolveStore } from "./resolve-persistence.ts";
import { resolveWebhooks } from "./resolve-webhooks.ts";
import { validateRawConfig } from "./validate.ts";
import { DEFAULTS } from "./defaults.ts";
import type { ResolveContext } from "./context.ts";
import type { ResolvedConfig } from "./types.ts";
import { ConfigError, type KeyPath } from "./errors.ts";
import { isInside } from "./root.ts";

export interface LoadConfigOptions {
  /** Base environment for `${{ env.VAR }}` templates and env fallbacks; default `process.env`.
   *  The config's own `env` is overlaid on it (config wins). Neither is modified. */
  env?: NodeJS.ProcessEnv;
  /**
   * The config file and every file it names (dotenv, graphs, auth, http.app, embed, ui) must really
   * be inside this directory (symlinks followed); files outside are problems, and are not read.
   */
  root?: string;
}

/** Loads `service.json` / `langgraph.json`. Throws ConfigError; never returns a partly valid config. */
export async function loadConfig(configPath: string, opts: LoadConfigOptions = {}): Promise<ResolvedConfig> {
  const absPath = path.resolve(configPath);
  const dir = path.dirname(absPath);
  const out = new ProblemCollector(configPath);
  const root = opts.root;
  if (root !== undefined && !isInside(root, absPath)) {
    throw new ConfigError(configPath, [{ key: "", message: `the config file is outside the project root ${root}` }]);
  }

  const data = await readJsonFile(absPath, configPath);
  const raw = validateRawConfig(data, out);
  out.throwIfAny();
  if (raw === null) throw new Error("unreachable: schema failure without problems");

  const env = await resolveEnvBlock(raw.env, dir, out, root);
  const ctx: ResolveContext = { dir, out, env: { ...(opts.env ?? process.env), ...env } };

  const config: ResolvedConfig = {
    configPath: absPath,
    configDir: dir,
    graphs: resolveGraphs(raw.graphs, ctx),
    env,
    nodeVersion: raw.node_version ?? DEFAULTS.nodeVersion,
    dependencies: [...(raw.dependencies ?? [])],
    http: resolveHttp(raw.http, ctx),
    auth: resolveAuth(raw.auth, ctx),
    webhooks: resolveWebhooks(raw.webhooks, ctx),
    store: resolveStore(raw.store, ctx),
    checkpointer: resolveCheckpointer(raw.checkpointer),
    logging: {
      level: raw.logging?.level ?? null,
      format: raw.logging?.format ?? null,
      requestsPerSecond: raw.logging?.requests_per_second ?? DEFAULTS.logging.requestsPerSecond,
    },
    ui: resolveUi(raw.ui, ctx),
    uiConfig: { shared: [...(raw.ui_config?.shared ?? [])] },
    warnings: [],
  };
  if (root !== undefined) checkInside(config, root, out);
  out.throwIfAny();
  return deepFreeze({ ...config, warnings: out.warningLines() });
}

/** Every module file the config names is inside `root` (LoadConfigOptions.root). */
function checkInside(config: ResolvedConfig, root: string, out: ProblemCollector): void {
  const files: [KeyPath, string | undefined][] = [
    ...config.graphs.map((g): [KeyPath, string] => [["graphs", g.graphId], g.filePath]),
    [["auth", "path"], config.auth.path?.filePath],
    [["http", "app"], config.http.app?.filePath],
    [["store", "index", "embed"], config.store.index?.embed.kind === "module" ? config.store.index.embed.filePath : undefined],
    ...Object.entries(config.ui).map(([name, file]): [KeyPath, string] => [["ui", name], file]),
  ];
  for (const [key, file] of files) if (file !== undefined && !isInside(root, file)) out.error(key, `${file} is outside the project root ${root}`);
}
