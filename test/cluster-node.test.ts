// ClusterNode in-process on a real PostgreSQL (two nodes, each with its own pool): who holds a
// thread, release and re-acquire, the alive count /info reads, a node id in use, and the drain
// (no new leases while draining, leases handed over, the node gone from the registry).
import { ClusterNode, type ClusterNodeOptions } from "../src/cluster/node.ts";
import { acquireLease, leaseOf } from "../src/cluster/leases.ts";
import { listNodes, newNodeIdentity, registerNode } from "../src/cluster/nodes.ts";
import { clockStamp, databaseStamp } from "../src/cluster/time.ts";
import { ManualClock } from "../src/util/clock.ts";
import { useClusterDatabase } from "./helpers/cluster.ts";
import { waitUntil } from "./helpers/wait.ts";

const cluster = useClusterDatabase();
const nodes: ClusterNode[] = [];
let ids = 0;
const uniqueId = (name: string) => `${name}-${process.pid}-${++ids}`;

afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});

async function startNode(nodeId: string, over: Partial<ClusterNodeOptions> = {}, waitMs?: number): Promise<ClusterNode> {
  const node = await ClusterNode.start(
    cluster.open(),
    {
      identity: newNodeIdentity(nodeId),
      heartbeatMs: 200,
      takeoverScanMs: 60_000, // no takeovers in these tests
      handle: async (body) => body,
      onTakeover: async () => undefined,
      onLeasesLost: () => undefined,
      ...over,
    },
    waitMs,
  );
  nodes.push(node);
  return node;
}

test("one holder per thread; release lets another node take it with a higher epoch; the alive count comes from the beats", async () => {
  const a = await startNode(uniqueId("a"));
  const b = await startNode(uniqueId("b"));
  const thread = uniqueId("t");
  const lease = await a.acquire(thread);
  expect(lease).toMatchObject({ nodeId: a.nodeId });
  expect(a.epochOf(thread)).toBe(lease!.epoch);
  expect(await b.acquire(thread)).toBeUndefined();
  expect(await b.ownerOf(thread)).toMatchObject({ nodeId: a.nodeId, expired: false });
  await a.release(thread);
  expect(a.epochOf(thread)).toBeUndefined();
  const taken = await b.acquire(thread);
  expect(taken?.epoch).toBeGreaterThan(lease!.epoch);
  await waitUntil(() => a.aliveNodes === 2 && b.aliveNodes === 2, { what: "both see two nodes alive" });
  // the forwarded-command path is live between them
  expect(await a.commands.forward(b.nodeId, "ping", 10_000)).toEqual({ status: "replied", body: "ping" });
});

test("a second process under a live node id is refused at start", async () => {
  const id = uniqueId("dup");
  await startNode(id);
  await expect(startNode(id, {}, 0)).rejects.toThrow(/is in use by a live node/);
});

test("drain: no new leases while it finishes its work, then its leases are handed over and it leaves the registry", async () => {
  const a = await startNode(uniqueId("a"));
  const b = await startNode(uniqueId("b"));
  const kept = uniqueId("t");
  await a.acquire(kept);
  let duringDrain: unknown = "not called";
  await a.drain(async () => {
    duringDrain = await a.acquire(uniqueId("t"));
  });
  expect(a.isDraining).toBe(true);
  expect(duringDrain).toBeUndefined();
  const db = cluster.open(1);
  expect(await leaseOf(db, kept, databaseStamp)).toMatchObject({ nodeId: a.nodeId, expired: true });
  expect((await listNodes(db, databaseStamp)).map((n) => n.nodeId)).not.toContain(a.nodeId);
  expect(await b.acquire(kept)).toMatchObject({ nodeId: b.nodeId }); // at once, no TTL to wait
});

test("a restart that succeeds its dead process (same node id): registered at once, the old holdings taken over by the first scan", async () => {
  const id = uniqueId("crashed");
  const db = cluster.open(1);
  // the crashed process: registered and holding a thread for a minute, beating no more (as after kill -9)
  const crashed = newNodeIdentity(id);
  expect(await registerNode(db, crashed, { ttlMs: 60_000, stamp: databaseStamp })).toEqual({ registered: true });
  const thread = uniqueId("t");
  const old = await acquireLease(db, thread, id, { ttlMs: 60_000, stamp: databaseStamp });

  const taken: number[] = [];
  const successor = await startNode(
    id,
    {
      identity: { ...newNodeIdentity(id), succeeds: crashed.instance },
      takeoverScanMs: 60_000,
      onTakeover: async (l) => void (l.threadId === thread && taken.push(l.epoch)),
    },
    0,
  );
  // no wait for the old registration (waitMs 0 would have thrown), and its lease taken over without waiting for the TTL or the scan period
  await waitUntil(() => taken.length === 1, { timeoutMs: 10_000, what: "the inherited lease taken over" });
  expect(taken[0]).toBeGreaterThan(old!.epoch);
  expect(await leaseOf(db, thread, databaseStamp)).toMatchObject({ nodeId: id, epoch: taken[0], expired: false });
  expect(successor.epochOf(thread)).toBe(taken[0]);
  // an instance that does not name the live one as its predecessor is still refused
  await expect(startNode(id, { identity: { ...newNodeIdentity(id), succeeds: "someone-else" } }, 0)).rejects.toThrow(/is in use by a live node/);
});

test("an idle thread's lease lingers, renewed like any other; idle leases then go together, a busy one stays", async () => {
  const clock = new ManualClock();
  const released: string[][] = [];
  const timing = { clock, stamp: clockStamp(clock), ttlMs: 15_000, heartbeatMs: 5_000, lingerMs: 6_000 };
  const a = await startNode(uniqueId("a"), { ...timing, onLeasesReleased: (threads) => released.push(threads) });
  const b = await startNode(uniqueId("b"), timing);
  const db = cluster.open(1);
  const [t1, t2, t3] = [uniqueId("t"), uniqueId("t"), uniqueId("t")];
  const leases = [await a.acquire(t1), await a.acquire(t2), await a.acquire(t3)];
  a.idle(t1);
  a.idle(t2);
  a.idle(t3);
  await clock.advance(1_000);
  a.busy(t3); // a command for t3 reached its actor: no longer idle
  await clock.advance(2_500);
  // within the linger: all still held here, with the epoch they were taken with (no re-acquire)
  for (const [i, t] of [t1, t2, t3].entries()) {
    expect(a.epochOf(t)).toBe(leases[i]!.epoch);
    expect(await leaseOf(db, t, clockStamp(clock))).toMatchObject({ nodeId: a.nodeId, epoch: leases[i]!.epoch, expired: false });
  }
  expect(await b.acquire(t1)).toBeUndefined(); // another node cannot take a lingering lease (it forwards)
  // the heartbeat renews lingering leases like the others (5 s)
  await clock.advance(1_500);
  await waitUntil(async () => (await leaseOf(db, t1, clockStamp(clock)))?.expiresAt.getTime() === clock.now() + 15_000, {
    what: "the beat at 5 s renewing the lingering lease",
  });
  // the linger ran out (6 s, swept every 3 s): t1 and t2 released together, t3 kept
  await clock.advance(999);
  expect(released).toEqual([]);
  await clock.advance(1);
  expect(released).toEqual([[t1, t2]]);
  expect(a.epochOf(t1)).toBeUndefined();
  expect(a.epochOf(t3)).toBe(leases[2]!.epoch);
  await waitUntil(async () => (await leaseOf(db, t1, clockStamp(clock))) === undefined && (await leaseOf(db, t2, clockStamp(clock))) === undefined, {
    what: "t1 and t2 released",
  });
  expect(await leaseOf(db, t3, clockStamp(clock))).toMatchObject({ nodeId: a.nodeId, expired: false });
  // released idle: the next holder inserts a new row and has nothing to recover
  expect(await b.acquire(t1)).toMatchObject({ nodeId: b.nodeId, recover: false });
  // idle again later: released in a later sweep
  a.idle(t3);
  await clock.advance(9_000);
  expect(released).toEqual([[t1, t2], [t3]]);
});

test("stop: idle leases are released (nothing to recover), the others handed over (the takeover scan recovers them)", async () => {
  const a = await startNode(uniqueId("a"), { lingerMs: 60_000 });
  const b = await startNode(uniqueId("b"));
  const [idle, working] = [uniqueId("t"), uniqueId("t")];
  await a.acquire(idle);
  await a.acquire(working);
  a.idle(idle);
  await a.drain(async () => undefined);
  const db = cluster.open(1);
  expect(await leaseOf(db, idle, databaseStamp)).toBeUndefined();
  expect(await leaseOf(db, working, databaseStamp)).toMatchObject({ nodeId: a.nodeId, expired: true });
  expect(await b.acquire(idle)).toMatchObject({ recover: false });
  expect(await b.acquire(working)).toMatchObject({ recover: true });
});

test("handOver: threads whose actors are gone (a shard died) are expired at once, for a takeover with recovery", async () => {
  const a = await startNode(uniqueId("a"));
  const b = await startNode(uniqueId("b"));
  const [t1, t2] = [uniqueId("t"), uniqueId("t")];
  await a.acquire(t1);
  await a.acquire(t2);
  a.idle(t2);
  await a.handOver([t1, t2]);
  expect(a.epochOf(t1)).toBeUndefined();
  expect(a.isLingering(t2)).toBe(false);
  expect(await b.acquire(t1)).toMatchObject({ nodeId: b.nodeId, recover: true });
  expect(await b.acquire(t2)).toMatchObject({ nodeId: b.nodeId, recover: true });
});
