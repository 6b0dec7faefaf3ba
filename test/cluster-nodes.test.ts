// The node registry and the heartbeat loop on a real PostgreSQL, with a ManualClock for both the
// loop's timers and the rows' stamps: a node is alive for a TTL after its last beat, its leases
// live as long as its beats renew them, and a node whose beats stop (paused, partitioned) gives
// its leases up on its own while another node takes them over and fences its late writes.
import { NodeHeartbeat, type HeartbeatOptions } from "../src/cluster/heartbeat.ts";
import { acquireLease, expiredLeases, leaseOf } from "../src/cluster/leases.ts";
import {
  countAliveNodes,
  deregisterNode,
  forgetDeadNodes,
  listNodes,
  markDraining,
  newNodeIdentity,
  registerNode,
  type NodeIdentity,
} from "../src/cluster/nodes.ts";
import { fenceSql, fenceValues, type Fence } from "../src/cluster/fence.ts";
import { clockStamp } from "../src/cluster/time.ts";
import { openPostgres, type PostgresDb } from "../src/storage/postgres/pool.ts";
import { ManualClock } from "../src/util/clock.ts";
import { useClusterDatabase } from "./helpers/cluster.ts";
import { waitUntil } from "./helpers/wait.ts";

const cluster = useClusterDatabase();
const TTL = 15_000;
const INTERVAL = 5_000;
let ids = 0;
const uniqueId = (name: string) => `${name}-${process.pid}-${++ids}`;

/** Only this file's rows: tests share the database. */
const aliveAmong = async (db: PostgresDb, clock: ManualClock, nodeIds: string[]) =>
  (await listNodes(db, clockStamp(clock)))
    .filter((n) => nodeIds.includes(n.nodeId) && n.alive)
    .map((n) => n.nodeId)
    .sort();

test("a node registers, is alive for a TTL after each beat, and a second process under its id is refused while it lives", async () => {
  const db = cluster.open();
  const clock = new ManualClock();
  const stamp = clockStamp(clock);
  const a = newNodeIdentity(uniqueId("a"));
  const b = newNodeIdentity(uniqueId("b"));
  expect(await registerNode(db, a, { ttlMs: TTL, stamp, info: { port: 1 } })).toEqual({ registered: true });
  expect(await registerNode(db, b, { ttlMs: TTL, stamp })).toEqual({ registered: true });
  expect(await aliveAmong(db, clock, [a.nodeId, b.nodeId])).toEqual([a.nodeId, b.nodeId].sort());
  const before = await countAliveNodes(db, stamp);

  // the same node id from another process: refused while the first instance is alive
  const impostor: NodeIdentity = { nodeId: a.nodeId, instance: "other" };
  expect(await registerNode(db, impostor, { ttlMs: TTL, stamp })).toEqual({ registered: false, heldUntil: new Date(clock.now() + TTL) });

  const hb = new NodeHeartbeat(db, heartbeatOptions(a, clock));
  await clock.advance(10_000);
  expect(await hb.beat()).toEqual({ nodeAlive: true, aliveNodes: before, renewed: 0, lost: [] });
  expect(hb.aliveNodes).toBe(before);
  await clock.advance(10_000); // b has not beaten for 20 s: dead; a beat 10 s ago: alive
  expect(await aliveAmong(db, clock, [a.nodeId, b.nodeId])).toEqual([a.nodeId]);
  expect(await countAliveNodes(db, stamp)).toBe(before - 1);
  await clock.advance(5_000); // now a's last beat is a TTL old too: the impostor may take the id
  expect(await registerNode(db, impostor, { ttlMs: TTL, stamp })).toEqual({ registered: true });
  // and the first instance's beat finds its row taken: it is told, and renews nothing
  const lost = { node: 0 };
  const hb2 = new NodeHeartbeat(db, heartbeatOptions(a, clock, { onNodeLost: () => lost.node++ }));
  expect((await hb2.beat()).nodeAlive).toBe(false);
  expect(lost.node).toBe(1);

  expect(await markDraining(db, impostor)).toBe(true);
  expect((await listNodes(db, stamp)).find((n) => n.nodeId === a.nodeId)).toMatchObject({ instance: "other", draining: true, alive: true });
  expect(await deregisterNode(db, impostor)).toBe(true);
  expect(await aliveAmong(db, clock, [a.nodeId, b.nodeId])).toEqual([]);
  // b's dead row is forgotten once dead long enough
  await clock.advance(60_000);
  expect(await forgetDeadNodes(db, { afterMs: 60_000, stamp })).toBeGreaterThanOrEqual(1);
  expect((await listNodes(db, stamp)).map((n) => n.nodeId)).not.toContain(b.nodeId);
});

function heartbeatOptions(node: NodeIdentity, clock: ManualClock, over: Partial<HeartbeatOptions> = {}): HeartbeatOptions {
  return {
    node,
    ttlMs: TTL,
    intervalMs: INTERVAL,
    clock,
    stamp: clockStamp(clock),
    onLeasesLost: () => undefined,
    onNodeLost: () => undefined,
    ...over,
  };
}

test("the heartbeat loop renews the node and every lease it holds; a lease that moved is reported lost", async () => {
  const db = cluster.open();
  const other = cluster.open();
  const clock = new ManualClock();
  const stamp = clockStamp(clock);
  const node = newNodeIdentity(uniqueId("hb"));
  await registerNode(db, node, { ttlMs: TTL, stamp });
  const lost: string[] = [];
  const hb = new NodeHeartbeat(db, heartbeatOptions(node, clock, { onLeasesLost: (t) => lost.push(...t) }));
  const threads = [uniqueId("t"), uniqueId("t"), uniqueId("t")];
  for (const t of threads) hb.hold((await acquireLease(db, t, node.nodeId, { ttlMs: TTL, stamp }))!);
  hb.start();
  let beats = 0;
  for (let i = 0; i < 6; i++) {
    // 30 s of beats: without them every lease would have expired twice
    const expiry = clock.now() + INTERVAL + TTL;
    await clock.advance(INTERVAL);
    await waitUntil(async () => (await leaseOf(db, threads[0], stamp))?.expiresAt.getTime() === expiry, { what: `beat ${++beats}` });
  }
  for (const t of threads) expect(await leaseOf(db, t, stamp)).toMatchObject({ nodeId: node.nodeId, expired: false });
  expect((await listNodes(db, stamp)).find((n) => n.nodeId === node.nodeId)?.expiresAt.getTime()).toBe(clock.now() + TTL);

  // an operator (or a bug) moves one lease: forced expiry, then another node takes it
  await other.pool.query("UPDATE thread_leases SET expires_at = '-infinity' WHERE thread_id = $1", [threads[1]]);
  expect(await acquireLease(other, threads[1], "node-x", { ttlMs: TTL, stamp })).toBeDefined();
  await clock.advance(INTERVAL);
  await waitUntil(() => lost.length > 0, { what: "the lost lease reported" });
  expect(lost).toEqual([threads[1]]);
  expect(hb.epochOf(threads[1])).toBeUndefined();
  expect(hb.heldCount).toBe(2);
  await hb.stop();
});

test("a node whose beats fail for a TTL gives up every lease; the others take them over and its late writes are refused", async () => {
  const db = cluster.open();
  const taker = cluster.open();
  const clock = new ManualClock();
  const stamp = clockStamp(clock);
  const node = newNodeIdentity(uniqueId("paused"));
  await registerNode(db, node, { ttlMs: TTL, stamp });
  // the node's heartbeat goes through a pool that cannot reach the database (a partition)
  const unreachable = openPostgres({ uri: "postgres://troupe@127.0.0.1:1/none", maxConnections: 1 });
  const lost: string[] = [];
  const errors: unknown[] = [];
  const hb = new NodeHeartbeat(unreachable, heartbeatOptions(node, clock, { onLeasesLost: (t) => lost.push(...t), onBeatError: (e) => errors.push(e) }));
  const leases = new Map<string, Fence>();
  for (let i = 0; i < 3; i++) {
    const lease = (await acquireLease(db, uniqueId("t"), node.nodeId, { ttlMs: TTL, stamp }))!;
    leases.set(lease.threadId, lease);
    hb.hold(lease);
  }
  try {
    hb.start();
    await clock.advance(INTERVAL);
    await waitUntil(() => errors.length >= 1, { what: "a failed beat" });
    await clock.advance(INTERVAL);
    await waitUntil(() => errors.length >= 2, { what: "a second failed beat" });
    expect(lost).toEqual([]); // 10 s without a beat: the leases may still be ours
    await clock.advance(INTERVAL); // 15 s: a TTL without a good beat
    await waitUntil(() => lost.length === 3, { what: "every lease given up" });
    expect(lost.sort()).toEqual([...leases.keys()].sort());
    expect(hb.heldCount).toBe(0);
  } finally {
    await hb.stop();
    await unreachable.close();
  }
  // another node finds them expired and takes each over with a new epoch
  const expired = (await expiredLeases(taker, { limit: 10_000, stamp })).filter((l) => leases.has(l.threadId));
  expect(expired.map((l) => l.threadId).sort()).toEqual([...leases.keys()].sort());
  for (const l of expired) {
    const taken = (await acquireLease(taker, l.threadId, "node-taker", { ttlMs: TTL, stamp }))!;
    expect(taken.epoch).toBeGreaterThan(leases.get(l.threadId)!.epoch);
  }
  // the paused node comes back and tries to finish its work: every write refused
  for (const fence of leases.values()) {
    const f = fenceSql(2);
    const w = await db.pool.query(`WITH ${f.cte} UPDATE thread_leases SET node_id = 'hijacked' WHERE thread_id = $1 AND ${f.holds} RETURNING 1`, [
      fence.threadId,
      ...fenceValues(fence),
    ]);
    expect(w.rowCount).toBe(0);
  }
  for (const t of leases.keys()) expect(await leaseOf(db, t, stamp)).toMatchObject({ nodeId: "node-taker" });
});
