// Starts a deployment server: config → LMDB → default assistants → webhook worker host → actor
// shards → routes → uWebSockets.js listener. Returns a handle to stop it cleanly.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { hostname } from "node:os";
import { createRequire } from "node:module";
import { WebhookWorkerHost } from "../webhooks/host.ts";
import { webhookUrlPolicy } from "../webhooks/url-policy.ts";
import { startIdleGc } from "../util/idle-gc.ts";
import { nativeMemoryError } from "../util/native-memory.ts";
import { compileWorkerModules } from "../loader/runtime-modules.ts";
import { useCompiledModules } from "../loader/user-modules.ts";
import { loadConfig, type ResolvedConfig } from "../config/index.ts";
import { ShardPool } from "../hub/shard-pool.ts";
import { ClusterShardPool } from "../hub/cluster-pool.ts";
import { assistantRoutes } from "../api/assistants.ts";
import { runRoutes } from "../api/runs.ts";
import { systemRoutes } from "../api/system.ts";
import { threadRoutes } from "../api/threads.ts";
import { storeRoutes } from "../api/store.ts";
import { a2aRoutes } from "../api/a2a.ts";
import { mcpRoutes } from "../api/mcp.ts";
import { cronRoutes, cronRunner } from "../api/crons.ts";
import { CronScheduler } from "../crons/scheduler.ts";
import { Dispatcher } from "../http/dispatch.ts";
import { componentLog, configureLogging } from "../log/logger.ts";
import { resolveLogOptions } from "../log/options.ts";
import { registerGraphLogger } from "../log/graph-logger.ts";
import { RequestTelemetry } from "../metrics/request-telemetry.ts";
import { ServerMetrics } from "../metrics/server-metrics.ts";
import { RateLimitDecisions } from "../ratelimit/decisions.ts";
import { corsGuard, corsHeaders } from "../http/cors.ts";
import { rateLimitGuard } from "../ratelimit/guard.ts";
import type { TrustedProxies } from "../ratelimit/client-ip.ts";
import { openApiKeyGuard, type ApiKeyAuthOptions } from "../http/api-key-guard.ts";
import { customAuthGuard, loadAuth } from "../auth/index.ts";
import { listen, loadNativeUws } from "../http/uws-server.ts";
import type { RouteDef } from "../http/types.ts";
import { AssistantStore } from "../domain/assistants.ts";
import { openStorage } from "../storage/open.ts";
import { canonicalUuidOf, defaultAssistantId } from "../util/ids.ts";
import { assistantNotFound } from "../errors.ts";
import { MAX_KEY_CHARS } from "../http/schemas/common.ts";
import type { AppContext } from "./context.ts";
import { RUNTIME_DEFAULTS } from "../config/runtime-defaults.ts";
import type { JsonObject } from "../storage/records.ts";
import { uiRoutes } from "../api/ui.ts";
import { ThreadTtlSweeper } from "../ttl/thread-sweeper.ts";
import { startStoreTtlSweep } from "../ttl/store-sweeper.ts";
import { customAppGuard, loadCustomApp } from "../http/custom-app.ts";
import { StaticSchemas } from "../schemas/static-schemas.ts";
import type { ResolvedStoreIndex } from "../config/types.ts";
import type { StoreIndexOptions } from "../storage/store-index.ts";
import { ClusterNode, LEASE_LINGER_MS } from "../cluster/node.ts";
import { restoreNodeIdentity } from "../cluster/node-identity-file.ts";
import { shareAssistantWrites } from "../cluster/assistant-notices.ts";
import type { NodeIdentity } from "../cluster/nodes.ts";
import { claimCronTick, forgetCronTicks } from "../cluster/cron-claims.ts";
import type { PostgresStorage } from "../storage/postgres/adapter.ts";
import { startClusterJobs, type ClusterJobs } from "./cluster-jobs.ts";
import { sweepStoreOnce } from "../ttl/store-sweeper.ts";
import { actorWorkerCount, actorWorkerYoungGenerationMb } from "./actor-workers.ts";

export interface ServerOptions {
  configPath: string;
  host?: string;
  port?: number;
  dataDir: string;
  /** postgres://… : the data lives in PostgreSQL (dataDir keeps compiled modules and schema caches) */
  databaseUri?: string;
  workers?: number;
  /** this server's name (/info, the metrics' node label; a cluster node's id); default TROUPE_NODE_NAME, else the host name */
  nodeId?: string;
  syncCommits?: boolean;
  /** platform rate limits (spec table) of a region; null = off; undefined = the config's `http.rate_limit` (default off) */
  rateLimit?: "us" | "eu" | null;
  /** multiply every limit by this (whichever option named the region) */
  rateLimitScale?: number;
  /** require X-Api-Key of this org, checked against the control plane's LMDB (src/http/api-key-guard.ts); null/undefined = off */
  apiKeyAuth?: ApiKeyAuthOptions | null;
  /** the config and every file it names must be inside this directory (LoadConfigOptions.root) */
  projectRoot?: string;
  /** reverse proxies whose X-Forwarded-For names the client the rate limits count (src/ratelimit/client-ip.ts) */
  trustedProxies?: TrustedProxies;
  /**
   * `troupe dev`'s developer defaults (the server binds loopback): the Studio header is honoured
   * and webhooks may go to loopback/private addresses on any port unless the config says otherwise.
   */
  dev?: boolean;
}

export interface RunningServer {
  url: string;
  port: number;
  host: string;
  config: ResolvedConfig;
  /** stop accepting, let running runs finish for up to graceMs (queued runs stay for the next start) */
  close(graceMs?: number): Promise<void>;
}

const require = createRequire(import.meta.url);

/** How often a cluster node re-reads every cron (crons created, changed or deleted through other nodes). */
const CRON_RESYNC_MS = 5_000;

export function packageVersion(): string {
  return (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;
}

export async function startServer(opts: ServerOptions): Promise<RunningServer> {
  loadNativeUws(); // refuse early, before spawning workers, if only the JS fallback is available
  const config = await loadConfig(opts.configPath, { root: opts.projectRoot });
  for (const [k, v] of Object.entries(config.env)) process.env[k] ??= v;
  const logOptions = resolveLogOptions(config.logging, process.env, opts.dev === true);
  configureLogging(logOptions, "http");
  const threadLog = { level: logOptions.level, format: logOptions.format }; // for the workers
  const log = componentLog("server");
  for (const p of logOptions.problems) log.warn(p);
  for (const w of config.warnings) log.warn(w);
  const nativeMemoryProblem = nativeMemoryError();
  if (nativeMemoryProblem !== undefined) {
    log.warn(
      `native memory addon not loaded (${nativeMemoryProblem}); run \`npm install\` with a C compiler present. Freed C-heap memory then stays resident after load bursts.`,
    );
  }
  registerGraphLogger(); // auth and http.app modules load on this thread
  // Nothing runs through tsx: the worker entries and every user module (graphs and embed function
  // in the workers; auth and http.app here) are compiled before anything imports them (src/loader/)
  const storeIndex = storeIndexOptions(config.store.index);
  const storeTtl = { defaultTtlMinutes: config.store.ttl.defaultTtlMinutes, refreshOnRead: config.store.ttl.refreshOnRead };
  const userModules = [
    ...config.graphs.map((g) => g.filePath),
    ...(storeIndex ? [storeIndex.embed.filePath] : []),
    ...(config.auth.path ? [config.auth.path.filePath] : []),
    ...(config.http.app ? [config.http.app.filePath] : []),
  ];
  const workerModules = await compileWorkerModules(opts.dataDir, userModules);
  // auth and http.app are loaded below, on this thread, and fail startup with the same message
  const loadedHere = new Set([config.auth.path?.filePath, config.http.app?.filePath]);
  for (const [file, message] of Object.entries(workerModules.user.errors)) {
    if (!loadedHere.has(file)) log.warn(`${file} does not compile: ${message}`);
  }
  useCompiledModules(workerModules.user);
  const customApp = config.http.app ? await loadCustomApp(config.http.app, config.configPath) : undefined; // http.app
  // Custom auth (src/auth/): import and check the Auth object before anything starts
  // the Studio header carries no credential: honoured on loopback `troupe dev`, or when the operator opts in
  const studioHeader = !config.auth.disableStudioAuth && (opts.dev === true || config.auth.allowStudioOnServe);
  const auth = config.auth.path ? await loadAuth(config.auth.path, { configPath: config.configPath, studioHeader }) : undefined;

  const apiKeys = opts.apiKeyAuth ? openApiKeyGuard(opts.apiKeyAuth) : null; // api keys: fail fast on a bad dir/org
  // cluster mode (docs/CLUSTER.md): on Postgres this server is one node of the deployment
  // a restart on the same data dir after a crash is the same node (node-identity-file.ts)
  const identity = opts.databaseUri === undefined ? undefined : restoreNodeIdentity(opts.dataDir, opts.nodeId ?? (process.env.TROUPE_NODE_NAME || undefined));
  const port = await openStorage({
    dataDir: opts.dataDir,
    syncCommits: opts.syncCommits,
    primary: true,
    databaseUri: opts.databaseUri,
    nodeId: identity?.nodeId,
  });
  const clusterDb = port.backend === "postgres" ? (port as PostgresStorage).db : undefined;
  const graphIds = new Set(config.graphs.map((g) => g.graphId));
  const assistants = new AssistantStore(port.assistants);
  await assistants.ensureDefaults(graphIds, parseGraphConfigs(process.env.LANGGRAPH_CONFIG));

  const webhookPolicy = webhookUrlPolicy(config.webhooks.url, opts.dev === true);
  // Relative webhook URLs are delivered in-process through the router (dispatcher set below).
  // The worker thread starts with the first run that asks for a webhook, or now if the outbox
  // holds deliveries from before a restart; with webhooks disabled it never starts (a config
  // `webhooks` section alone sends nothing, so it does not start it either).
  let dispatcher: Dispatcher | undefined;
  const webhooks = new WebhookWorkerHost({
    entryUrl: workerModules.webhook,
    dataDir: opts.dataDir,
    databaseUri: opts.databaseUri,
    syncCommits: opts.syncCommits,
    nodeId: identity?.nodeId,
    log: threadLog,
    headers: { ...config.webhooks.headers },
    signingSecret: config.webhooks.signingSecret,
    urlPolicy: webhookPolicy,
    dispatch: async (method, path, headers, body) => {
      if (!dispatcher) return { status: 503 };
      const [p, q = ""] = path.split("?");
      const reply = await dispatcher.dispatch({
        method,
        path: p,
        query: q,
        headers,
        body: body === undefined ? null : Buffer.from(body),
        clientIp: "127.0.0.1",
        signal: new AbortController().signal,
      });
      if (reply.kind === "stream") reply.cancel(); // a delivery reads only the status
      return { status: "status" in reply ? reply.status : 200 };
    },
  }).unref();

  const poolOptions = {
    workerEntry: workerModules.actorShard,
    modules: workerModules.user,
    dataDir: opts.dataDir,
    databaseUri: opts.databaseUri,
    syncCommits: opts.syncCommits,
    nodeId: identity?.nodeId,
    graphs: config.graphs.map((g) => ({ graphId: g.graphId, filePath: g.filePath, exportName: g.exportName })),
    env: { ...config.env },
    storeTtl,
    storeIndex,
    workers: actorWorkerCount(opts.workers, opts.databaseUri),
    youngGenerationMb: actorWorkerYoungGenerationMb(opts.databaseUri),
    webhookPortFor: config.http.disableWebhooks ? undefined : () => webhooks.connectPort(),
    onShardMessages: () => port.refreshReads(),
    log: threadLog,
  };
  // With a database, this server is a node of a cluster (docs/CLUSTER.md): its pool routes each
  // thread's commands to the node holding the thread's lease. Without one, the plain pool.
  const postgres = port.backend === "postgres" ? (port as PostgresStorage) : undefined;
  const clusterPool = postgres && new ClusterShardPool({ ...poolOptions, schema: postgres.db.schema, runs: port.runs, threads: port.threads });
  const pool = clusterPool ?? new ShardPool(poolOptions);
  const cluster = postgres && clusterPool && identity && (await startClusterNode(postgres, clusterPool, identity, opts, packageVersion()));

  // Metrics and the request log (src/metrics/, src/log/)
  const telemetry = new RequestTelemetry(logOptions.requestsPerSecond);
  const rateLimitDecisions = opts.rateLimit ? new RateLimitDecisions() : undefined;
  const nodeId = identity?.nodeId ?? opts.nodeId ?? (process.env.TROUPE_NODE_NAME || hostname());
  const metrics = new ServerMetrics({
    http: telemetry.http,
    streams: telemetry.streams,
    shards: pool.metrics,
    shardAlive: (i) => pool.shardAlive(i),
    idleBoard: pool.idleBoard,
    webhooks: config.http.disableWebhooks ? undefined : webhooks.counters,
    rateLimits: rateLimitDecisions,
    storage: port,
    node: nodeId,
  });

  /** The assistant id a graph id or assistant id names (404 past the longest key there can be). */
  const assistantIdOf = (idOrGraph: string): string => {
    if (idOrGraph.length > MAX_KEY_CHARS) throw assistantNotFound(); // no key that long exists (or fits LMDB)
    return graphIds.has(idOrGraph) ? defaultAssistantId(idOrGraph) : (canonicalUuidOf(idOrGraph) ?? idOrGraph);
  };
  const app: AppContext = {
    storage: port,
    pool,
    config,
    graphIds,
    version: packageVersion(),
    langgraphVersion: (require("@langchain/langgraph/package.json") as { version: string }).version,
    auth,
    webhookPolicy,
    storeIndex,
    storeTtl,
    webhookCounters: webhooks.counters,
    staticSchemas: new StaticSchemas(new Map(config.graphs.map((g) => [g.graphId, g])), {
      entryUrl: workerModules.schemaExtract,
      cacheDir: join(opts.dataDir, "modules", "schemas"),
    }),
    metrics,
    node: { id: nodeId, aliveNodes: cluster ? () => cluster.aliveNodes : () => 1 },
    resolveAssistant: async (idOrGraph) => {
      const a = await port.assistants.get(assistantIdOf(idOrGraph));
      if (!a) throw assistantNotFound();
      return a;
    },
    resolveRunAssistant: async (idOrGraph, fresh) => {
      const a = await port.assistants.forRun(assistantIdOf(idOrGraph), fresh);
      if (!a) throw assistantNotFound();
      return a;
    },
  };

  // Crons: scheduler on the HTTP thread (src/crons/), only when run routes are enabled
  // in a cluster every node schedules every cron and fires the ticks it claims (src/cluster/cron-claims.ts)
  const cronClaims =
    clusterDb && identity
      ? {
          claim: (cronId: string, tickAt: Date) => claimCronTick(clusterDb, cronId, tickAt, identity.nodeId),
          forget: (cronId: string) => forgetCronTicks(clusterDb, cronId),
          resyncMs: CRON_RESYNC_MS,
        }
      : undefined;
  const crons = config.http.disableRuns ? null : new CronScheduler(port.crons, cronRunner(app), undefined, cronClaims);

  dispatcher = new Dispatcher({ maxBodyBytes: config.http.maxBodyBytes, commonHeaders: corsHeaders(config.http.cors), observer: telemetry });
  dispatcher.addGuard(corsGuard(config.http.cors));
  // before authentication: only keys that verify get key buckets, everything else counts against its IP
  const rateLimitRegion = opts.rateLimit === undefined ? config.http.rateLimit : opts.rateLimit;
  if (rateLimitRegion) {
    dispatcher.addGuard(
      rateLimitGuard(
        { region: rateLimitRegion, scale: opts.rateLimitScale },
        { verifiesKey: apiKeys?.verifies, trustedProxies: opts.trustedProxies, decisions: rateLimitDecisions },
      ),
    );
  }
  if (apiKeys) dispatcher.addGuard(apiKeys.guard); // api keys: after rate limits, before custom auth
  const groups: RouteDef[][] = [];
  // http.disable_meta removes /openapi.json, /info, /metrics and /docs; /ok stays
  if (!config.http.disableMeta) groups.push(systemRoutes(app, () => dispatcher.routes));
  else groups.push(systemRoutes(app, () => dispatcher.routes).filter((r) => r.path === "/ok"));
  if (!config.http.disableAssistants) groups.push(assistantRoutes(app));
  if (!config.http.disableThreads) groups.push(threadRoutes(app));
  if (!config.http.disableRuns) groups.push(runRoutes(app));
  if (crons) groups.push(cronRoutes(app, crons)); // crons
  if (!config.http.disableStore) groups.push(storeRoutes(app));
  if (!config.http.disableMcp) groups.push(mcpRoutes(app));
  if (!config.http.disableA2a) groups.push(a2aRoutes(app));
  if (!config.http.disableUi) groups.push(uiRoutes(app));
  // Custom auth: authenticate after CORS and rate limits; auth errors keep the user's status
  if (auth) {
    dispatcher.addGuard(customAuthGuard(auth));
    groups.forEach((g, i) => (groups[i] = auth.exactErrors(g)));
  }
  if (customApp) dispatcher.addGuard(Object.assign(customAppGuard(customApp), { readsBody: true })); // http.app: after auth; its routes win over the built-ins
  for (const g of groups) dispatcher.add(...g);

  await crons?.start(); // crons
  const ttl = config.checkpointer.ttl;
  const threadTtl = new ThreadTtlSweeper(port, pool, {
    defaultTtlMinutes: ttl.defaultTtlMinutes,
    strategy: ttl.strategy,
    sweepIntervalMinutes: ttl.sweepIntervalMinutes,
    sweepLimit: ttl.sweepLimit,
  });
  const storeSweepInterval = config.store.ttl.sweepIntervalMinutes;
  let stopStoreSweep: () => void = () => undefined;
  let clusterJobs: ClusterJobs | undefined;
  if (cluster && clusterDb) {
    // one node at a time runs each sweep and chore (docs/CLUSTER.md "Singleton jobs")
    clusterJobs = startClusterJobs({
      db: clusterDb,
      nodeId,
      threadTtl: { run: () => threadTtl.sweep(), everyMs: ttl.sweepIntervalMinutes * 60_000 },
      storeTtl: storeSweepInterval === null ? undefined : { run: () => sweepStoreOnce(port.store), everyMs: storeSweepInterval * 60_000 },
      webhooks: config.http.disableWebhooks ? undefined : webhooks,
      cleanupPayloads: () => cluster.bus.cleanupPayloads(),
      onError: (job, err) => log.warn(`cluster job ${job}: ${(err as Error)?.message ?? String(err)}`),
    });
  } else {
    threadTtl.start();
    if (storeSweepInterval !== null) stopStoreSweep = startStoreTtlSweep(port.store, storeSweepInterval);
  }

  const host = opts.host ?? RUNTIME_DEFAULTS.loopbackHost;
  if (!config.http.disableWebhooks && (await port.webhooks.anyPending())) webhooks.start();
  const server = await listen(dispatcher, host, opts.port ?? RUNTIME_DEFAULTS.port);
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${server.port}`;
  // Once a load burst is over: give the JS and C heaps back to the OS, and the storage's mapped pages
  const stopIdleGc = startIdleGc({ board: { buffer: pool.idleBoard, slot: 0 } }, () => port.releaseMemory());
  let closed = false;
  return {
    url,
    port: server.port,
    host,
    config,
    async close(graceMs: number = RUNTIME_DEFAULTS.shutdownGraceMs) {
      if (closed) return;
      closed = true;
      stopIdleGc();
      threadTtl.stop();
      stopStoreSweep();
      server.close();
      telemetry.log.flush();
      await clusterJobs?.stop();
      await crons?.stop(); // crons: before the pool, so in-flight ticks finish creating their runs
      // a cluster node: marked draining (takes no lease), its runs finish within the grace period,
      // then every lease it still holds is handed over (the others resume those runs at once); it
      // leaves only after its webhook worker stopped: a live node's deliveries are never taken over
      const stopRuntime = async () => {
        await pool.close(graceMs);
        await webhooks.terminate();
      };
      if (cluster) await cluster.drain(stopRuntime);
      else await stopRuntime();
      await port.close();
      await apiKeys?.close();
    },
  };
}

/** Lease TTL of a cluster node: 15 s, or TROUPE_CLUSTER_LEASE_TTL_MS (tests shorten it); beats and takeover scans every third of it. */
function clusterTtlMs(): number {
  const raw = process.env.TROUPE_CLUSTER_LEASE_TTL_MS;
  const ms = raw === undefined || raw === "" ? 15_000 : Number(raw);
  if (!Number.isInteger(ms) || ms < 1_500) throw new Error(`TROUPE_CLUSTER_LEASE_TTL_MS must be an integer of at least 1500, got "${raw}"`);
  return ms;
}

/** How long an idle thread's lease lingers: LEASE_LINGER_MS, or TROUPE_CLUSTER_LEASE_LINGER_MS (0: released at once, as soon as a sweep runs). */
function clusterLingerMs(): number {
  const raw = process.env.TROUPE_CLUSTER_LEASE_LINGER_MS;
  const ms = raw === undefined || raw === "" ? LEASE_LINGER_MS : Number(raw);
  if (!Number.isInteger(ms) || ms < 0) throw new Error(`TROUPE_CLUSTER_LEASE_LINGER_MS must be a non-negative integer, got "${raw}"`);
  return ms;
}

/** Joins the cluster on the server's database: registration, heartbeat, bus, forwarded commands, takeover scan. */
async function startClusterNode(
  storage: PostgresStorage,
  pool: ClusterShardPool,
  identity: NodeIdentity,
  opts: ServerOptions,
  version: string,
): Promise<ClusterNode> {
  const log = componentLog("cluster");
  const ttlMs = clusterTtlMs();
  const node = await ClusterNode.start(storage.db, {
    identity,
    ttlMs,
    heartbeatMs: Math.round(ttlMs / 3),
    takeoverScanMs: Math.round(ttlMs / 3),
    info: { port: opts.port ?? null, version },
    payloadCleanupEveryMs: 0, // the cluster-chores singleton does it
    handle: (body) => pool.handleForwarded(body),
    onTakeover: (lease) => pool.takeOver(lease),
    onLeasesLost: (threadIds) => pool.leasesLost(threadIds),
    lingerMs: clusterLingerMs(),
    onLeasesReleased: (threadIds) => pool.leasesReleased(threadIds),
    onError: (err) => log.warn("cluster", { err }),
  });
  pool.attach(node);
  // other nodes' run caches drop an assistant this node writes (their run creates check it anyway)
  await shareAssistantWrites(node.bus, storage.db.schema, storage.assistants, (err) => log.warn("assistant notice", { err }));
  log.info("joined the cluster", { node: node.nodeId, alive: node.aliveNodes });
  return node;
}

/** `store.index` as the stores apply it: module embed functions only (provider:model needs network providers). */
export function storeIndexOptions(index: ResolvedStoreIndex | null): StoreIndexOptions | undefined {
  if (!index) return undefined;
  if (index.embed.kind !== "module") {
    componentLog("server").warn(
      `store.index.embed "${index.embed.provider}:${index.embed.model}": provider embeddings are not supported; give a module ("./embed.ts:fn"). The store has no semantic index.`,
    );
    return undefined;
  }
  return { dims: index.dims, fields: [...index.fields], embed: { filePath: index.embed.filePath, exportName: index.embed.exportName } };
}

/** LANGGRAPH_CONFIG: per-graph default assistant config (reference §12.3). */
function parseGraphConfigs(raw: string | undefined): Record<string, JsonObject> {
  if (!raw) return {};
  try {
    const v = JSON.parse(raw) as unknown;
    return v && typeof v === "object" ? (v as Record<string, JsonObject>) : {};
  } catch {
    throw new Error("LANGGRAPH_CONFIG is not valid JSON");
  }
}
