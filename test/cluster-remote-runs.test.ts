// Run watches of a cluster node (src/hub/remote-runs.ts) on a real PostgreSQL, with a real
// ClusterNode, run hub and Postgres storage: which watched runs have their record read once a second.
// A run created on this node's shard while it holds the thread is not read while that holding
// lasts (its end reaches the hub from the shard, as on one node): before, every run a node created
// was read once a second for as long as it ran. Once the holding goes, the reads resume and a final
// record ends the run for its waiters.
import { ClusterNode } from "../src/cluster/node.ts";
import { newNodeIdentity } from "../src/cluster/nodes.ts";
import { RemoteRuns } from "../src/hub/remote-runs.ts";
import { RunHub } from "../src/hub/run-hub.ts";
import { openPostgresStorage, type PostgresStorage } from "../src/storage/postgres/adapter.ts";
import type { RunsPort } from "../src/storage/port.ts";
import { useClusterDatabase } from "./helpers/cluster.ts";
import { runRecord, threadRecord } from "./helpers/records.ts";

const cluster = useClusterDatabase();
let storage: PostgresStorage | undefined;
let node: ClusterNode | undefined;
let remote: RemoteRuns | undefined;

afterEach(async () => {
  remote?.close();
  await node?.stop();
  await storage?.close();
});

/** The storage's runs port, telling which runs' records were read with `get` (a watch's look). */
function countingReads(runs: RunsPort, reads: string[]): RunsPort {
  return new Proxy(runs, {
    get(target, key) {
      if (key === "get") return (threadId: string, runId: string) => (reads.push(runId), target.get(threadId, runId));
      const value: unknown = Reflect.get(target, key);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test("a run created on the node holding its thread is not read while that holding lasts; once it goes, the record ends the run", async () => {
  storage = await openPostgresStorage({ uri: cluster.uri, maxConnections: 4 });
  node = await ClusterNode.start(cluster.open(), {
    identity: newNodeIdentity(`remote-runs-${process.pid}`),
    takeoverScanMs: 60_000, // no takeovers here
    handle: async (body) => body,
    onTakeover: async () => undefined,
    onLeasesLost: () => undefined,
  });
  const held = "00000000-0000-4000-8000-0000000e0001";
  const notHeld = "00000000-0000-4000-8000-0000000e0002";
  const localRun = runRecord(held, "00000000-0000-7000-8000-0000000e00a1", { status: "running" });
  const otherRun = runRecord(notHeld, "00000000-0000-7000-8000-0000000e00a2", { status: "running" });
  for (const [thread, run] of [
    [held, localRun],
    [notHeld, otherRun],
  ] as const) {
    await storage.threads.create(threadRecord(thread));
    await storage.runs.create({ run, thread: threadRecord(thread, { status: "busy" }), prev: undefined }).committed;
  }
  const lease = (await node.acquire(held))!;
  const reads: string[] = [];
  const hub = new RunHub();
  remote = new RemoteRuns({
    hub,
    node,
    schema: "public",
    runs: countingReads(storage.runs, reads),
    threads: storage.threads,
    observeAt: async () => undefined,
    outputOf: async () => undefined,
  });
  const streams = remote.view();

  // what ClusterShardPool.createRun does with each create's reply; a request then waits for the run
  remote.created(localRun.run_id, held);
  remote.created(otherRun.run_id, notHeld);
  const localDone = streams.waitFor(localRun.run_id);
  await sleep(2_600);
  expect(reads.filter((r) => r === localRun.run_id)).toEqual([]);
  // a run this node does not run is still looked at once a second
  expect(reads.filter((r) => r === otherRun.run_id).length).toBeGreaterThanOrEqual(2);

  // the holding goes (a write refused by the fence) and the run ends elsewhere: its record ends it here
  expect(node.lost(held, lease.epoch)).toBe(true);
  await storage.runs.save({ ...localRun, status: "success" }).committed;
  await expect(localDone).resolves.toMatchObject({ runId: localRun.run_id, status: "success" });
  expect(reads.filter((r) => r === localRun.run_id).length).toBeGreaterThanOrEqual(1);
}, 30_000);
