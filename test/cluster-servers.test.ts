// The cluster harness (test/helpers/cluster-servers.ts) on real processes: three `troupe serve`
// nodes on one PostgreSQL see each other in /info; one killed with -9 comes back under its node id.
import { startTestCluster, type TestCluster } from "./helpers/cluster-servers.ts";

let cluster: TestCluster | undefined;
afterAll(async () => {
  await cluster?.close();
});

test("three nodes on one database: each answers /info with its node id and 3 nodes alive; a killed node restarts under its id", async () => {
  cluster = await startTestCluster({ nodes: 3 });
  const infos = await Promise.all([0, 1, 2].map((i) => cluster!.info(i)));
  expect(infos.map((i) => i.node_id)).toEqual(cluster.nodes.map((n) => n.nodeId));
  expect(infos.map((i) => i.nodes_alive)).toEqual([3, 3, 3]);
  expect(new Set([cluster.nextUrl(), cluster.nextUrl(), cluster.nextUrl()]).size).toBe(3);

  await cluster.kill(1);
  expect(cluster.urls()).toHaveLength(2);
  // restarted on its data dir at once, while the killed process's registration still runs (15 s TTL):
  // the new process succeeds it instead of waiting
  await cluster.restart(1);
  await cluster.waitAlive(3);
  expect((await cluster.info(1)).node_id).toBe(cluster.nodes[1].nodeId);
}, 180_000);
