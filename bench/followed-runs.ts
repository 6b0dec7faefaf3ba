// What a cluster node pays for runs it follows on another node (issue 22): N long runs executing
// on node A (their leases held there, their records `running`), followed from node B as a
// cross-node join follows them (RemoteRuns.watch); B's statements per second by kind over a window
// after a warm-up. Both nodes are real ClusterNodes on a fresh database; the modules come from
// CHECKOUT (A/B old and new code). Counts are exact; no timing is measured.
//
//   npx tsx bench/followed-runs.ts ADMIN_URI CHECKOUT N [SECONDS=5]
//   ADMIN_URI: a PostgreSQL to create a database on (e.g. `npx tsx bench/local-postgres.ts --fast`)
import { resolve } from "node:path";
import { runRecord, threadRecord } from "../test/helpers/records.ts";

const [adminUri, checkoutArg, nArg, secondsArg] = process.argv.slice(2);
if (!adminUri || !checkoutArg || !nArg) {
  console.error("usage: followed-runs.ts ADMIN_URI CHECKOUT N [SECONDS=5]");
  process.exit(2);
}
const checkout = resolve(checkoutArg);
const n = Number(nArg);
const seconds = Number(secondsArg ?? 5);
const mod = (p: string) => import(resolve(checkout, p));
const { openPostgres } = await mod("src/storage/postgres/pool.ts");
const { migrate } = await mod("src/storage/postgres/migrations.ts");
const { openPostgresStorage } = await mod("src/storage/postgres/adapter.ts");
const { ClusterNode } = await mod("src/cluster/node.ts");
const { newNodeIdentity } = await mod("src/cluster/nodes.ts");
const { RemoteRuns } = await mod("src/hub/remote-runs.ts");
const { RunHub } = await mod("src/hub/run-hub.ts");
const pg = (await import("pg")).default;

const name = `followed_${process.pid}`;
const admin = new pg.Client({ connectionString: adminUri });
await admin.connect();
await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
await admin.query(`CREATE DATABASE ${name}`);
const url = new URL(adminUri);
url.pathname = `/${name}`;
const uri = url.toString();

const setup = openPostgres({ uri, maxConnections: 2 });
await migrate(setup);
await setup.close();
const storage = await openPostgresStorage({ uri, maxConnections: 4 });
const nodeOpts = { takeoverScanMs: 60_000, handle: async (b: string) => b, onTakeover: async () => undefined, onLeasesLost: () => undefined };
const dbA = openPostgres({ uri, maxConnections: 4 });
const dbB = openPostgres({ uri, maxConnections: 4 });
const nodeA = await ClusterNode.start(dbA, { ...nodeOpts, identity: newNodeIdentity("bench-a") });
const nodeB = await ClusterNode.start(dbB, { ...nodeOpts, identity: newNodeIdentity("bench-b") });

const runs: [string, string][] = [];
for (let i = 0; i < n; i++) {
  const hex = i.toString(16).padStart(12, "0");
  const thread = `00000000-0000-4000-8000-${hex}`;
  const run = runRecord(thread, `00000000-0000-7000-8000-${hex}`, { status: "running" });
  await storage.threads.create(threadRecord(thread));
  await storage.runs.create({ run, thread: threadRecord(thread, { status: "busy" }), prev: undefined }).committed;
  await nodeA.acquire(thread);
  runs.push([thread, run.run_id]);
}

const counts = new Map<string, number>();
const query = dbB.pool.query.bind(dbB.pool) as (...a: unknown[]) => unknown;
dbB.pool.query = ((...args: unknown[]) => {
  const sql = typeof args[0] === "string" ? args[0] : ((args[0] as { text?: string }).text ?? "?");
  const kind = sql.replace(/\s+/g, " ").trim().slice(0, 48);
  counts.set(kind, (counts.get(kind) ?? 0) + 1);
  return query(...args);
}) as typeof dbB.pool.query;
let storageReads = 0;
const runsPort = new Proxy(storage.runs, {
  get(target, key) {
    if (key === "get") return (t: string, r: string) => (storageReads++, target.get(t, r));
    const v = Reflect.get(target, key);
    return typeof v === "function" ? v.bind(target) : v;
  },
});
const remote = new RemoteRuns({
  hub: new RunHub(),
  node: nodeB,
  schema: "public",
  runs: runsPort,
  threads: storage.threads,
  observeAt: async () => undefined,
  outputOf: async () => undefined,
});
for (const [thread, run] of runs) remote.watch(run, thread);
await new Promise((r) => setTimeout(r, 3_000)); // warm-up: each watch's first look
counts.clear();
storageReads = 0;
await new Promise((r) => setTimeout(r, seconds * 1_000));
const total = [...counts.values()].reduce((a, b) => a + b, 0);
console.log(
  `${checkout} N=${n} over ${seconds} s: node B ${(total / seconds).toFixed(1)} statements/s on its cluster pool, ${(storageReads / seconds).toFixed(1)} run record reads/s`,
);
for (const [k, v] of [...counts].sort((a, b) => b[1] - a[1])) console.log(`  ${(v / seconds).toFixed(1)}/s  ${k}`);

remote.close();
await nodeB.stop();
await nodeA.stop();
await storage.close();
await dbA.close();
await dbB.close();
await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
await admin.end();
