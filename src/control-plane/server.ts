// Starts the control plane: its LMDB env → deployment service (relaunching every active revision)
// → Dispatcher with the rate limiter, guards and routes handed in by other modules (auth, tokens)
// → uWebSockets.js listener. Returns a handle whose close() drains every deployment server.
import { mkdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { Dispatcher, type Guard } from "../http/dispatch.ts";
import { buildOpenApi, CONTROL_PLANE_SECURITY, renderDocsHtml } from "../http/openapi.ts";
import { json, type RouteDef } from "../http/types.ts";
import { listen, type ListeningServer } from "../http/uws-server.ts";
import { rateLimitGuard } from "../ratelimit/guard.ts";
import type { TrustedProxies } from "../ratelimit/client-ip.ts";
import { Deployer } from "./deployments/deployer.ts";
import { DeploymentService } from "./deployments/service.ts";
import { ProjectRoots, type ProjectRootsOptions } from "./deployments/project-roots.ts";
import { DeploymentStore } from "./deployments/store.ts";
import type { DeploymentRecord } from "./deployments/types.ts";
import { controlPlaneRoutes } from "./routes.ts";
import { openControlPlaneStorage, type ControlPlaneStorage } from "./storage.ts";
import { RUNTIME_DEFAULTS, urlHostOf } from "../config/runtime-defaults.ts";
import { componentLog } from "../log/logger.ts";

export type Region = "us" | "eu";

export interface DeploymentServerOptions {
  /** address deployment servers bind and their URLs name (default 127.0.0.1) */
  host?: string;
  /** `serve --workers` (default: the server's default, one per CPU) */
  workers?: number;
  /** `serve --rate-limit` (default: the control plane's region) */
  rateLimit?: Region | "off";
  /** a starting server must answer GET /ok within this (default 60 s) */
  readyTimeoutMs?: number;
  /** SIGKILL a draining server after this (default 20 s) */
  stopTimeoutMs?: number;
  /** config check + graph import check (default 120 s) */
  buildTimeoutMs?: number;
  /** first crash-restart delay (default 500 ms; doubles per consecutive crash up to 30 s) */
  restartBackoffMs?: number;
  /** more `serve` flags for a deployment (e.g. API-key enforcement added by the auth module) */
  args?(deployment: DeploymentRecord): string[];
  /** more env vars for a deployment's server (win over its secrets) */
  env?(deployment: DeploymentRecord): Record<string, string>;
}

export interface ControlPlaneOptions {
  host?: string;
  /** default 8124; 0 = any free port */
  port?: number;
  dataDir: string;
  /** rate-limit region of the control plane and (by default) its deployment servers; default "us" */
  region?: Region;
  /** platform rate limits on control-plane requests (default `{ region }`); null = off */
  rateLimit?: { region: Region; scale?: number } | null;
  /** default 1 MiB */
  maxBodyBytes?: number;
  /**
   * Where deployment sources may live: each organization's projects in `<root>/<tenant id>`, or
   * (perTenant false) all in `root`. Default `{ root: <dataDir>/projects, perTenant: true }`.
   */
  projects?: ProjectRootsOptions;
  /** route groups of other control-plane modules (auth tokens, keys), given the storage */
  extraRoutes?: RouteDef[] | ((storage: ControlPlaneStorage) => RouteDef[]);
  /** guards (API key / tenant checks) run after the rate limiter, before routing */
  guards?: Guard[] | ((storage: ControlPlaneStorage) => Guard[]);
  /** does an x-api-key verify? Only such keys get rate-limit buckets of their own (else the client IP's) */
  verifiesKey?: (storage: ControlPlaneStorage) => (key: string) => boolean;
  /** reverse proxies whose X-Forwarded-For is honoured, here and (as --trusted-proxies) on deployment servers */
  trustedProxies?: TrustedProxies;
  deployments?: DeploymentServerOptions;
  log?(message: string): void;
}

export interface RunningControlPlane {
  url: string;
  port: number;
  host: string;
  storage: ControlPlaneStorage;
  deployments: DeploymentService;
  /** stops listening, drains every deployment server, closes the LMDB env */
  close(): Promise<void>;
}

export const CONTROL_PLANE_API = { title: "Troupe Control Plane API", version: "0.1.0" } as const;

function troupeVersion(): string {
  return (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;
}

export async function startControlPlane(opts: ControlPlaneOptions): Promise<RunningControlPlane> {
  const dataDir = resolve(opts.dataDir);
  const region = opts.region ?? "us";
  const log = opts.log ?? ((m: string) => componentLog("control-plane").info(m));
  const dep = opts.deployments ?? {};
  const depHost = dep.host ?? RUNTIME_DEFAULTS.loopbackHost;
  const storage = openControlPlaneStorage(dataDir);
  const store = new DeploymentStore(storage);
  const serverRateLimit = dep.rateLimit ?? region;
  const projects = new ProjectRoots(opts.projects ?? { root: join(dataDir, "projects") });
  mkdirSync(projects.root, { recursive: true });

  const deployer = new Deployer(store, {
    dataDir,
    host: depHost,
    urlHost: urlHostOf(depHost),
    imageVersion: troupeVersion(),
    buildTimeoutMs: dep.buildTimeoutMs ?? 120_000,
    serverArgs: (d) => [
      "--rate-limit",
      serverRateLimit,
      // explicit, so a deployment's secrets (env vars) cannot widen it
      "--trusted-proxies",
      opts.trustedProxies?.cidrs.join(",") ?? "",
      // every start re-checks that the config and its files are in the organization's directory
      ...(projects.of(d.tenant_id) !== undefined ? ["--project-root", projects.of(d.tenant_id)!] : []),
      ...(dep.workers !== undefined ? ["--workers", String(dep.workers)] : []),
      ...(dep.args?.(d) ?? []),
    ],
    serverEnv: (d) => ({
      TROUPE_CONTROL_PLANE_DIR: dataDir,
      TROUPE_DEPLOYMENT_ID: d.id,
      TROUPE_TENANT_ID: d.tenant_id,
      ...(dep.env?.(d) ?? {}),
    }),
    projectRoot: (d) => projects.of(d.tenant_id),
    supervisor: {
      readyTimeoutMs: dep.readyTimeoutMs,
      stopTimeoutMs: dep.stopTimeoutMs,
      backoffInitialMs: dep.restartBackoffMs,
    },
    log,
  });
  const deployments = new DeploymentService(store, deployer, depHost, projects);

  const dispatcher = new Dispatcher({ maxBodyBytes: opts.maxBodyBytes ?? 1024 * 1024 });
  const rateLimit = opts.rateLimit === undefined ? { region } : opts.rateLimit;
  if (rateLimit) dispatcher.addGuard(rateLimitGuard(rateLimit, { verifiesKey: opts.verifiesKey?.(storage), trustedProxies: opts.trustedProxies }));
  const guards = typeof opts.guards === "function" ? opts.guards(storage) : (opts.guards ?? []);
  for (const g of guards) dispatcher.addGuard(g);

  let doc: Record<string, unknown> | undefined;
  const openapi = () =>
    (doc ??= buildOpenApi(
      dispatcher.routes,
      { ...CONTROL_PLANE_API, description: "Deployments (v2) and auth service of the Troupe control plane" },
      CONTROL_PLANE_SECURITY,
    ));
  dispatcher.add(
    { method: "GET", path: "/ok", operationId: "ok", summary: "Health check", tag: "system", handler: () => json({ ok: true }) },
    { method: "GET", path: "/openapi.json", operationId: "openapi", summary: "OpenAPI document", tag: "system", handler: () => json(openapi()) },
    {
      method: "GET",
      path: "/docs",
      operationId: "docs",
      summary: "API reference (HTML)",
      tag: "system",
      handler: () => ({ kind: "text", status: 200, contentType: "text/html; charset=utf-8", body: renderDocsHtml(openapi()) }),
    },
  );
  dispatcher.add(...controlPlaneRoutes({ deployments }));
  const extra = typeof opts.extraRoutes === "function" ? opts.extraRoutes(storage) : (opts.extraRoutes ?? []);
  dispatcher.add(...extra);

  const host = opts.host ?? RUNTIME_DEFAULTS.loopbackHost;
  let server: ListeningServer;
  try {
    server = await listen(dispatcher, host, opts.port ?? RUNTIME_DEFAULTS.controlPlanePort);
  } catch (err) {
    await storage.close();
    throw err;
  }
  deployer.resumeAll();

  let closing: Promise<void> | undefined;
  return {
    url: `http://${urlHostOf(host)}:${server.port}`,
    port: server.port,
    host,
    storage,
    deployments,
    close() {
      closing ??= (async () => {
        server.close();
        await deployer.close();
        await storage.close();
      })();
      return closing;
    },
  };
}
