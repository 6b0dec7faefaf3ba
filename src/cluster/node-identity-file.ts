// A node's identity across restarts: the data dir remembers the node id and the process that last
// used it (cluster-node.json). A server restarted on the same data dir after a crash comes back as
// the same node, so it takes over its own registration, leases and webhook deliveries at once
// instead of waiting for the dead process's registration to expire (a TTL, then the drain delay).
/*
 * The previous process counts as dead only when that is certain: the file was written on this host
 * and its pid is not running (or is our own pid: a container restarted as pid 1). A live pid, even
 * an unrelated process that reused it, keeps the old behaviour (a fresh id, or waiting out the
 * registration of an explicit --node-id): being wrong there only costs the wait.
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { newNodeIdentity, NODE_ID, type NodeIdentity } from "./nodes.ts";

export const IDENTITY_FILE = "cluster-node.json";

interface IdentityFile {
  nodeId: string;
  instance: string;
  host: string;
  pid: number;
}

/** How to check a pid: true while a process with it runs (injectable for tests). */
export type PidAlive = (pid: number) => boolean;

export const pidAlive: PidAlive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM"; // exists, owned by someone else
  }
};

function readIdentityFile(path: string): IdentityFile | undefined {
  try {
    const data = JSON.parse(readFileSync(path, "utf8")) as Partial<IdentityFile>;
    if (typeof data.nodeId !== "string" || !NODE_ID.test(data.nodeId)) return undefined;
    if (typeof data.instance !== "string" || typeof data.host !== "string" || typeof data.pid !== "number") return undefined;
    return data as IdentityFile;
  } catch {
    return undefined; // absent or unreadable: a first start
  }
}

/**
 * This process's node identity: `explicitId` (--node-id) if given, else the data dir's remembered
 * id when its last process is certainly dead, else a fresh one. `succeeds` is set when the
 * remembered process of that id is certainly dead (registration may take its place at once).
 * Records this process in the data dir.
 */
export function restoreNodeIdentity(dataDir: string, explicitId?: string, alive: PidAlive = pidAlive): NodeIdentity {
  const path = join(dataDir, IDENTITY_FILE);
  const last = readIdentityFile(path);
  const lastDead = last !== undefined && last.host === hostname() && (last.pid === process.pid || !alive(last.pid));
  const nodeId = explicitId ?? (lastDead ? last.nodeId : undefined);
  const base = newNodeIdentity(nodeId);
  const identity: NodeIdentity = lastDead && last.nodeId === base.nodeId ? { ...base, succeeds: last.instance } : base;
  mkdirSync(dataDir, { recursive: true });
  const tmp = `${path}.${randomBytes(4).toString("hex")}.tmp`;
  writeFileSync(tmp, JSON.stringify({ nodeId: identity.nodeId, instance: identity.instance, host: hostname(), pid: process.pid } satisfies IdentityFile));
  renameSync(tmp, path); // whole or not at all
  return identity;
}
