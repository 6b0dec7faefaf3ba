// `troupe` command line: dev / serve a deployment server; control-plane and keys are their own modules.
import { parseArgs } from "node:util";
import { resolve } from "node:path";
import { existsSync } from "node:fs";
import { ConfigError } from "./config/index.ts";
import { isParseArgsError, UsageError, wantsHelp } from "./cli-usage.ts";
import { startServer } from "./server/create.ts";
import { componentLog } from "./log/logger.ts";
import { RUNTIME_DEFAULTS as D } from "./config/runtime-defaults.ts";
import { apiKeyAuthFromFlags, SERVE_AUTH_USAGE } from "./control-plane/auth/serve-flags.ts"; // api keys
import { trustedProxiesFrom } from "./cli-usage.ts";
import { NODE_ID } from "./cluster/nodes.ts";
import { redactedUri, StorageOpenError } from "./storage/open.ts";

const USAGE = `troupe — LangGraph-compatible agent server

Usage:
  troupe dev   [--config FILE] [--port ${D.port}] [--data-dir DIR] [--database-uri URI] [--workers N]
  troupe serve [--config FILE] [--port ${D.port}] [--host ${D.serveHost}] [--data-dir DIR] [--database-uri URI] [--workers N] [--node-id ID] [--sync-commits] [--low-memory] [--rate-limit us|eu|off] [--trusted-proxies CIDRS] [--org ORG --control-plane-dir DIR]
  troupe control-plane [--port ${D.controlPlanePort}] [--host ${D.loopbackHost}] [--data-dir DIR] [--region us|eu] [--projects-root DIR] [--trusted-proxies CIDRS]   (see docs/CONTROL_PLANE.md)
  troupe keys create|list|revoke --org NAME [--data-dir DIR] …   (API keys; see docs/AUTH.md)
  troupe migrate --from DIR|URI --to DIR|URI [--schema NAME] [--batch N] [--progress-every N]
                    (copy a deployment between an LMDB data dir and PostgreSQL, either way; docs/STORAGE.md)

  --config FILE     service.json or langgraph.json (default: ./service.json, then ./langgraph.json)
  --port N          port to listen on (default ${D.port}, the SDK's default; 0 = any free port)
  --host ADDR       address to bind (dev: always ${D.loopbackHost}; serve: default ${D.serveHost})
  --data-dir DIR    LMDB data directory (default ./${D.dataDir}); with --database-uri it keeps only
                    local scratch (compiled modules, schema cache)
  --database-uri URI  store everything in PostgreSQL (postgres://user:password@host:port/db; env
                    DATABASE_URI; the flag wins). Migrations run at startup. Default: LMDB in --data-dir
  --workers N       actor worker threads (default: number of CPUs; one less when the database is on this machine)
  --node-id ID      this server's name in /info and the metrics' node label (letters, digits, . _ -;
                    default: TROUPE_NODE_NAME, else the host name)
  --sync-commits    fsync every commit (survives power loss; slower). Default survives kill -9.
  --low-memory      favour memory over speed (V8 --optimize-for-size; also TROUPE_LOW_MEMORY=1):
                    about 40% less RSS under load for about half the throughput at high concurrency
  --rate-limit R    platform rate limits (the hosted platform's table, docs/RATE_LIMITS.md) of region us|eu,
                    or off. serve: default off, or the config's http.rate_limit; dev: always off
  --rate-limit-scale F  multiply every limit by F (e.g. 100000 to measure the limiter's cost under load)
  --trusted-proxies CIDRS  comma-separated addresses/CIDRs of reverse proxies whose X-Forwarded-For
                    names the client the rate limits count (env TROUPE_TRUSTED_PROXIES; default none)
  --project-root DIR  refuse a config that is, or names files, outside DIR (the control plane passes
                    each deployment its organization's projects directory)
${SERVE_AUTH_USAGE}`;

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (!command || command === "--help" || command === "-h" || command === "help") {
    process.stdout.write(USAGE);
    return;
  }
  if (wantsHelp(rest) && command !== "keys") {
    process.stdout.write(USAGE);
    return;
  }
  if (command === "control-plane") {
    const { runControlPlaneCommand } = await import("./control-plane/cli.ts");
    return runControlPlaneCommand(rest);
  }
  if (command === "keys") {
    const { runKeysCommand } = await import("./control-plane/auth/cli.ts");
    process.exitCode = await runKeysCommand(rest);
    return;
  }
  if (command === "migrate") {
    const { runMigrateCommand } = await import("./storage/migrate/cli.ts");
    return runMigrateCommand(rest);
  }
  if (command !== "dev" && command !== "serve") {
    process.stderr.write(`Unknown command "${command}".\n\n${USAGE}`);
    process.exit(2);
  }
  const { values } = parseArgs({
    args: rest,
    options: {
      config: { type: "string" },
      port: { type: "string" },
      host: { type: "string" },
      "data-dir": { type: "string" },
      "database-uri": { type: "string" },
      workers: { type: "string" },
      "node-id": { type: "string" },
      "sync-commits": { type: "boolean" },
      "low-memory": { type: "boolean" }, // applied (and announced) by bin/troupe.js before anything starts
      "rate-limit": { type: "string" },
      "rate-limit-scale": { type: "string" },
      "trusted-proxies": { type: "string" },
      "project-root": { type: "string" },
      "control-plane-dir": { type: "string" }, // api keys
      org: { type: "string" }, // api keys
    },
    strict: true,
  });
  const configPath = resolve(values.config ?? (existsSync("service.json") ? "service.json" : "langgraph.json"));
  if (values.config === undefined && !existsSync(configPath)) {
    throw new UsageError(`no config file: looked for ${resolve("service.json")} and ${configPath} (pass --config FILE)`);
  }
  const port = values.port === undefined ? D.port : Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError(`--port must be an integer 0-65535, got "${values.port}"`);
  const workers = values.workers === undefined ? undefined : Number(values.workers);
  if (workers !== undefined && (!Number.isInteger(workers) || workers < 1))
    throw new UsageError(`--workers must be a positive integer, got "${values.workers}"`);
  const nodeId = values["node-id"];
  if (nodeId !== undefined && !NODE_ID.test(nodeId))
    throw new UsageError(`--node-id must be 1-40 letters, digits, ".", "_" or "-" (starting with a letter or digit), got "${nodeId}"`);
  const host = command === "dev" ? D.loopbackHost : (values.host ?? D.serveHost);
  // undefined: the config's http.rate_limit decides (default off)
  const rl = command === "dev" ? "off" : (values["rate-limit"] ?? process.env.TROUPE_RATE_LIMIT);
  if (rl !== undefined && rl !== "us" && rl !== "eu" && rl !== "off") throw new UsageError(`--rate-limit must be us, eu or off, got "${rl}"`);
  const databaseUri = databaseUriFrom(values["database-uri"]);
  const server = await startServer({
    configPath,
    host,
    port,
    dataDir: resolve(values["data-dir"] ?? D.dataDir),
    databaseUri,
    workers,
    nodeId,
    syncCommits: values["sync-commits"] ?? false,
    rateLimit: rl === "off" ? null : rl,
    rateLimitScale: rateLimitScale(values["rate-limit-scale"] ?? process.env.TROUPE_RATE_LIMIT_SCALE),
    apiKeyAuth: apiKeyAuthFromFlags(command, values), // api keys
    dev: command === "dev",
    trustedProxies: trustedProxiesFrom(values["trusted-proxies"]),
    projectRoot: values["project-root"] === undefined ? undefined : resolve(values["project-root"]),
  });
  // The line tests and scripts wait for: keep its format stable.
  process.stdout.write(`troupe listening on ${server.url} (graphs: ${server.config.graphs.map((g) => g.graphId).join(", ")})\n`);
  // uWebSockets.js 20.30 answers HTTP/1.1 only: an HTTP/1.0 request (nginx's default to upstreams)
  // gets no reply at all. Say so where an operator looks (README "Behind nginx").
  if (command === "serve") {
    componentLog("server").info(
      'HTTP/1.1 only (HTTP/1.0 requests get no answer); behind nginx set `proxy_http_version 1.1;` and `proxy_set_header Connection "";`',
    );
  }
  const stop = () => {
    void server.close().then(() => process.exit(0));
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if (err instanceof UsageError || isParseArgsError(err)) {
    process.stderr.write(`troupe: ${err.message}\nRun "troupe --help" for usage.\n`);
    process.exit(2);
  }
  if (err instanceof StorageOpenError) process.stderr.write(`troupe: ${err.message}\n`);
  else if (err instanceof ConfigError) process.stderr.write(`troupe: invalid configuration\n${err.message}\n`);
  else process.stderr.write(`troupe: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exit(1);
});

/** `--database-uri` (else $DATABASE_URI; empty = unset): a postgres:// or postgresql:// URI. */
function databaseUriFrom(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const raw = flag ?? env.DATABASE_URI;
  if (raw === undefined || raw.trim() === "") return undefined;
  const source = flag === undefined ? "DATABASE_URI" : "--database-uri";
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`${source} must be a postgres://user:password@host:port/database URI, got ${JSON.stringify(redactedUri(raw))}`);
  }
  if (url.protocol !== "postgres:" && url.protocol !== "postgresql:") {
    throw new UsageError(`${source} must be a postgres:// or postgresql:// URI, got ${JSON.stringify(redactedUri(raw))}`);
  }
  return raw;
}

function rateLimitScale(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const f = Number(raw);
  if (!(f > 0) || !Number.isFinite(f)) throw new UsageError(`--rate-limit-scale must be a positive number, got "${raw}"`);
  return f;
}
