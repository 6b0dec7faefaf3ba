// A cluster of real `troupe serve` processes (bin/troupe.js, as test/helpers/server.ts starts one)
// on one fresh database of the test run's PostgreSQL: each node with its own port 0, data dir and
// --node-id. Nodes can be killed (-9), stopped (SIGTERM) and restarted under the same node id and
// data dir; close() stops them all and drops the database.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createTestDatabase, type TestDatabase } from "./postgres.ts";
import { startTestServer, type TestServer } from "./server.ts";
import { waitUntil } from "./wait.ts";

export interface ClusterNodeProcess {
  /** the node's --node-id */
  readonly nodeId: string;
  readonly dataDir: string;
  /** the running process (undefined while stopped or killed) */
  readonly server: TestServer | undefined;
  /** its URL; throws while the node is down */
  readonly url: string;
}

export interface ClusterInfo {
  node_id: string;
  nodes_alive: number;
}

export interface TestCluster {
  readonly databaseUri: string;
  readonly nodes: readonly ClusterNodeProcess[];
  /** URLs of the nodes now running, in node order */
  urls(): string[];
  /** round-robin over the running nodes: each call the next one's URL */
  nextUrl(): string;
  /** GET /info of a running node */
  info(index: number): Promise<ClusterInfo>;
  /** waits until every running node's /info counts `count` live nodes (default: the running ones) */
  waitAlive(count?: number, timeoutMs?: number): Promise<void>;
  /** kill -9 (the data dir and database stay) */
  kill(index: number): Promise<void>;
  /** SIGTERM: the node drains and exits */
  stop(index: number): Promise<void>;
  /** starts a stopped or killed node again under its node id and data dir */
  restart(index: number): Promise<void>;
  /** stops every node, removes the data dirs and drops the database */
  close(): Promise<void>;
}

export interface ClusterOptions {
  /** how many nodes (default 3) */
  nodes?: number;
  /** actor workers per node (default 1: three nodes share the machine's cores) */
  workers?: number;
  config?: string;
  env?: Record<string, string>;
  extraArgs?: string[];
  /** a database to use instead of a fresh one (it is not dropped by close()) */
  databaseUri?: string;
  /** wait for every node's /info to count all of them (default true) */
  waitAlive?: boolean;
}

interface NodeSlot {
  nodeId: string;
  dataDir: string;
  server: TestServer | undefined;
}

/** Starts `nodes` servers on one database (in parallel) and waits until they see each other. */
export async function startTestCluster(opts: ClusterOptions = {}): Promise<TestCluster> {
  const count = opts.nodes ?? 3;
  let database: TestDatabase | undefined;
  const databaseUri = opts.databaseUri ?? (database = await createTestDatabase()).uri;
  const tag = `${process.pid}-${Math.random().toString(36).slice(2, 6)}`;
  const slots: NodeSlot[] = Array.from({ length: count }, (_, i) => ({
    nodeId: `node-${i + 1}-${tag}`,
    dataDir: mkdtempSync(join(tmpdir(), `troupe-cluster-${i + 1}-`)),
    server: undefined,
  }));

  const launch = async (slot: NodeSlot): Promise<void> => {
    slot.server = await startTestServer({
      command: "serve",
      config: opts.config,
      dataDir: slot.dataDir,
      databaseUri,
      workers: opts.workers ?? 1,
      env: opts.env,
      extraArgs: ["--host", "127.0.0.1", "--node-id", slot.nodeId, ...(opts.extraArgs ?? [])],
      startTimeoutMs: 90_000, // several servers starting on a shared two-core machine
    });
  };
  const running = () => slots.filter((s) => s.server !== undefined);
  const serverOf = (index: number): TestServer => {
    const server = slots[index]?.server;
    if (server === undefined) throw new Error(`cluster node ${index} is not running`);
    return server;
  };
  let turn = 0;

  const cluster: TestCluster = {
    databaseUri,
    nodes: slots.map((slot) => ({
      get nodeId() {
        return slot.nodeId;
      },
      get dataDir() {
        return slot.dataDir;
      },
      get server() {
        return slot.server;
      },
      get url() {
        if (slot.server === undefined) throw new Error(`cluster node ${slot.nodeId} is not running`);
        return slot.server.url;
      },
    })),
    urls: () => running().map((s) => s.server!.url),
    nextUrl() {
      const urls = cluster.urls();
      if (urls.length === 0) throw new Error("no cluster node is running");
      return urls[turn++ % urls.length];
    },
    async info(index) {
      const res = await fetch(`${serverOf(index).url}/info`);
      if (!res.ok) throw new Error(`GET /info of node ${index}: ${res.status}`);
      return (await res.json()) as ClusterInfo;
    },
    async waitAlive(expected, timeoutMs = 60_000) {
      const want = expected ?? running().length;
      await waitUntil(
        async () => {
          const seen = await Promise.all(slots.map((s, i) => (s.server === undefined ? undefined : cluster.info(i))));
          return seen.every((info) => info === undefined || info.nodes_alive === want);
        },
        { timeoutMs, intervalMs: 250, what: `every running node's /info to count ${want} live nodes` },
      );
    },
    async kill(index) {
      await serverOf(index).kill();
      slots[index].server = undefined;
    },
    async stop(index) {
      await serverOf(index).stop();
      slots[index].server = undefined;
    },
    async restart(index) {
      const slot = slots[index];
      if (slot.server !== undefined) throw new Error(`cluster node ${index} is running`);
      // on its data dir the new process succeeds the killed one at once (src/cluster/node-identity-file.ts):
      // no wait for the old registration's TTL
      await launch(slot);
    },
    async close() {
      await Promise.all(slots.map((s) => s.server?.stop()));
      for (const s of slots) {
        s.server = undefined;
        rmSync(s.dataDir, { recursive: true, force: true });
      }
      await database?.drop();
    },
  };

  try {
    // one after the other: the first applies the migrations, and starts do not starve each other
    for (const slot of slots) await launch(slot);
    if (opts.waitAlive !== false) await cluster.waitAlive(count);
  } catch (err) {
    await cluster.close().catch(() => undefined);
    throw err;
  }
  return cluster;
}
