// The data dir's memory of the node identity (src/cluster/node-identity-file.ts): a restart after a
// crash is the same node, succeeding its dead process; anything uncertain gets the old behaviour.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { IDENTITY_FILE, restoreNodeIdentity } from "../../src/cluster/node-identity-file.ts";

const dirs: string[] = [];
const dataDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "troupe-node-id-"));
  dirs.push(dir);
  return dir;
};
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

const dead = () => false;
const alive = () => true;
const recorded = (dir: string) => JSON.parse(readFileSync(join(dir, IDENTITY_FILE), "utf8")) as Record<string, unknown>;
const writeRecord = (dir: string, record: Record<string, unknown>) => writeFileSync(join(dir, IDENTITY_FILE), JSON.stringify(record));

test("first start: a fresh id, recorded with this process; no predecessor", () => {
  const dir = dataDir();
  const first = restoreNodeIdentity(dir, undefined, dead);
  expect(first.succeeds).toBeUndefined();
  expect(recorded(dir)).toEqual({ nodeId: first.nodeId, instance: first.instance, host: hostname(), pid: process.pid });
});

test("a restart after the last process died keeps the node id and succeeds that process's instance", () => {
  const dir = dataDir();
  writeRecord(dir, { nodeId: "web-1", instance: "old", host: hostname(), pid: 999_999 });
  const next = restoreNodeIdentity(dir, undefined, dead);
  expect(next).toMatchObject({ nodeId: "web-1", succeeds: "old" });
  expect(next.instance).not.toBe("old");
  expect(recorded(dir)).toMatchObject({ nodeId: "web-1", instance: next.instance, pid: process.pid });
});

test("our own pid in the record (a container restarted as the same pid) counts as dead", () => {
  const dir = dataDir();
  writeRecord(dir, { nodeId: "web-1", instance: "old", host: hostname(), pid: process.pid });
  expect(restoreNodeIdentity(dir, undefined, alive)).toMatchObject({ nodeId: "web-1", succeeds: "old" });
});

test("a live pid, another host or a broken file: a fresh id, no predecessor", () => {
  for (const record of [
    { nodeId: "web-1", instance: "old", host: hostname(), pid: 999_999 }, // alive below
    { nodeId: "web-1", instance: "old", host: `${hostname()}-elsewhere`, pid: 999_999 },
    { nodeId: "not a node id!", instance: "old", host: hostname(), pid: 999_999 },
  ]) {
    const dir = dataDir();
    writeRecord(dir, record);
    const next = restoreNodeIdentity(dir, undefined, alive);
    expect(next.nodeId).not.toBe("web-1");
    expect(next.succeeds).toBeUndefined();
  }
  const dir = dataDir();
  writeFileSync(join(dir, IDENTITY_FILE), "{not json");
  expect(restoreNodeIdentity(dir, undefined, dead).succeeds).toBeUndefined();
});

test("an explicit --node-id succeeds the dead process only when it ran under that id", () => {
  const dir = dataDir();
  writeRecord(dir, { nodeId: "web-1", instance: "old", host: hostname(), pid: 999_999 });
  expect(restoreNodeIdentity(dir, "web-1", dead)).toMatchObject({ nodeId: "web-1", succeeds: "old" });
  const other = dataDir();
  writeRecord(other, { nodeId: "web-1", instance: "old", host: hostname(), pid: 999_999 });
  const renamed = restoreNodeIdentity(other, "web-2", dead);
  expect(renamed).toMatchObject({ nodeId: "web-2" });
  expect(renamed.succeeds).toBeUndefined();
});
