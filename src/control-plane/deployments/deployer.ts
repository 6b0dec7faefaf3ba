// Walks revisions through their statuses for real, one deployment at a time (a per-deployment
// lane serialises rollouts, redeploys and deletes): QUEUED → AWAITING_BUILD → BUILDING (config +
// graph import check) → AWAITING_DEPLOY → DEPLOYING (drain the old server, start the new one on the
// same port and data dir) → DEPLOYED once GET /ok answered. Also relaunches servers at startup.
import { mkdirSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { Supervisor, reapStaleServer, type ServerSpec, type SupervisorOptions } from "../supervisor.ts";
import { buildRevision } from "./build.ts";
import type { DeploymentStore } from "./store.ts";
import { TERMINAL_REVISION_STATUSES, type DeploymentRecord, type RevisionRecord, type RevisionStatus, type Secret } from "./types.ts";

export interface DeployerOptions {
  /** the control plane's data dir; deployment N lives in <dir>/deployments/N/{data,server.log} */
  dataDir: string;
  /** address deployment servers bind (default 127.0.0.1) */
  host: string;
  /** host name put in deployment URLs */
  urlHost: string;
  imageVersion: string;
  buildTimeoutMs: number;
  /** extra `serve` flags per deployment */
  serverArgs(d: DeploymentRecord): string[];
  /** extra env per deployment (wins over secrets) */
  serverEnv(d: DeploymentRecord): Record<string, string>;
  /** the directory a deployment's sources must be inside (its organization's projects directory) */
  projectRoot(d: DeploymentRecord): string | undefined;
  supervisor: Omit<SupervisorOptions, "onCrash" | "onPid" | "onRestarted" | "log">;
  log(message: string): void;
}

export const secretsEnv = (secrets: readonly Secret[]): Record<string, string> => Object.fromEntries(secrets.map((s) => [s.name, s.value]));

export class Deployer {
  readonly supervisor: Supervisor;
  private readonly lanes = new Map<string, Promise<unknown>>();
  private readonly builds = new Map<string, AbortController>();
  /** fire-and-forget record updates (pid, restart count), awaited by close() */
  private readonly writes = new Set<Promise<unknown>>();
  private closed = false;

  constructor(
    private readonly store: DeploymentStore,
    private readonly o: DeployerOptions,
  ) {
    this.supervisor = new Supervisor({
      ...o.supervisor,
      log: o.log,
      onPid: (key, pid) => this.quietly(this.store.update(key, () => ({ server_pid: pid }))),
      onCrash: (key) => {
        const active = this.store.get(key)?.active_revision_id;
        if (active) this.quietly(this.store.updateRevision(key, active, (r) => ({ restart_count: r.restart_count + 1 })));
      },
    });
  }

  deploymentDir(id: string): string {
    return join(this.o.dataDir, "deployments", id);
  }

  url(d: Pick<DeploymentRecord, "port">): string {
    return `http://${this.o.urlHost}:${d.port}`;
  }

  /** Queues the rollout of a stored revision (CREATING → QUEUED now, the rest on the lane). */
  submit(deploymentId: string, revisionId: string): Promise<void> {
    const queued = this.setRev(deploymentId, revisionId, "QUEUED");
    return this.enqueue(deploymentId, async () => {
      await queued;
      try {
        await this.rollout(deploymentId, revisionId);
      } catch (err) {
        // an internal failure must not leave the revision walking forever
        const r = this.store.getRevision(deploymentId, revisionId);
        if (r && !TERMINAL_REVISION_STATUSES.has(r.status) && !this.gone(deploymentId)) {
          const status = r.status === "DEPLOYING" ? "DEPLOY_FAILED" : r.status === "CREATING" || r.status === "QUEUED" ? "CREATE_FAILED" : "BUILD_FAILED";
          await this.end(deploymentId, revisionId, status, `internal error: ${(err as Error)?.message ?? String(err)}`);
        }
        throw err;
      }
    });
  }

  /** Marks AWAITING_DELETE, cancels a running build, then stops the server and removes everything. */
  async delete(deploymentId: string): Promise<void> {
    await this.store.setStatus(deploymentId, "AWAITING_DELETE");
    this.builds.get(deploymentId)?.abort();
    await this.enqueue(deploymentId, () => this.remove(deploymentId));
  }

  /** Startup: finish pending deletes, relaunch each active revision, re-queue unfinished rollouts. */
  resumeAll(): void {
    for (const d of this.store.all()) {
      if (d.status === "AWAITING_DELETE") {
        void this.enqueue(d.id, () => this.remove(d.id));
        continue;
      }
      if (d.active_revision_id) {
        const activeId = d.active_revision_id;
        void this.enqueue(d.id, () => this.relaunch(d.id, activeId));
      }
      for (const r of this.store.revisions(d.id)) {
        if (TERMINAL_REVISION_STATUSES.has(r.status)) continue;
        if (r.id === d.latest_revision_id) void this.submit(d.id, r.id);
        else this.quietly(this.end(d.id, r.id, "SKIPPED", `superseded by revision ${d.latest_revision_id} before it was deployed`));
      }
    }
  }

  /** Stops every server (they drain) and lets the lanes wind down; revisions in flight stay as they are and resume on the next start. */
  async close(): Promise<void> {
    this.closed = true;
    for (const b of this.builds.values()) b.abort();
    await this.supervisor.stopAll();
    await Promise.allSettled([...this.lanes.values()]);
    await Promise.allSettled([...this.writes]);
  }

  private enqueue<T>(deploymentId: string, job: () => Promise<T>): Promise<T> {
    const prev = this.lanes.get(deploymentId) ?? Promise.resolve();
    const run = prev.then(job);
    const settled = run.catch((err: unknown) => this.o.log(`${deploymentId}: ${(err as Error)?.stack ?? String(err)}`));
    this.lanes.set(deploymentId, settled);
    void settled.then(() => {
      if (this.lanes.get(deploymentId) === settled) this.lanes.delete(deploymentId);
    });
    return run;
  }

  private async rollout(deploymentId: string, revisionId: string): Promise<void> {
    if (this.gone(deploymentId)) return;
    if (this.overtaken(deploymentId, revisionId)) return this.skip(deploymentId, revisionId);
    await this.setRev(deploymentId, revisionId, "AWAITING_BUILD");
    await this.setRev(deploymentId, revisionId, "BUILDING");
    const rev = this.store.getRevision(deploymentId, revisionId)!;
    const root = this.o.projectRoot(this.store.get(deploymentId)!);
    if (root === undefined) return this.end(deploymentId, revisionId, "BUILD_FAILED", "this tenant id cannot name a projects directory");
    const abort = new AbortController();
    this.builds.set(deploymentId, abort);
    const built = await buildRevision(rev.source_revision_config.langgraph_config_path, {
      env: secretsEnv(rev.secrets),
      timeoutMs: this.o.buildTimeoutMs,
      signal: abort.signal,
      root,
    }).finally(() => this.builds.delete(deploymentId));
    if (this.gone(deploymentId)) return;
    if (!built.ok) return this.end(deploymentId, revisionId, "BUILD_FAILED", built.message);
    await this.setRev(deploymentId, revisionId, "AWAITING_DEPLOY");
    if (this.overtaken(deploymentId, revisionId)) return this.skip(deploymentId, revisionId);
    await this.setRev(deploymentId, revisionId, "DEPLOYING");
    const d = this.store.get(deploymentId)!;
    const previous = d.active_revision_id ? this.store.getRevision(deploymentId, d.active_revision_id) : undefined;
    // One server per data dir: the old one drains first (running runs finish within its grace
    // period, queued runs stay in LMDB), then the new one starts there and picks them up.
    await this.supervisor.stop(deploymentId);
    if (this.gone(deploymentId)) return;
    try {
      await this.supervisor.start(this.spec(d, rev));
    } catch (err) {
      if (this.gone(deploymentId)) return;
      await this.end(deploymentId, revisionId, "DEPLOY_FAILED", (err as Error).message);
      if (previous && previous.id !== revisionId && !this.gone(deploymentId)) {
        this.o.log(`${deploymentId}: revision ${revisionId} failed to deploy; relaunching revision ${previous.id}`);
        await this.supervisor
          .start(this.spec(d, previous), { keepTrying: true })
          .catch((e: Error) => this.o.log(`${deploymentId}: relaunch failed, retrying: ${e.message}`));
      }
      return;
    }
    await this.end(deploymentId, revisionId, "DEPLOYED");
  }

  private async relaunch(deploymentId: string, revisionId: string): Promise<void> {
    const d = this.store.get(deploymentId);
    const rev = this.store.getRevision(deploymentId, revisionId);
    if (!d || !rev || this.gone(deploymentId) || this.supervisor.has(deploymentId)) return;
    if (d.server_pid) await reapStaleServer(d.server_pid, join(this.deploymentDir(d.id), "data"), 20_000);
    if (this.gone(deploymentId)) return;
    await this.supervisor
      .start(this.spec(d, rev), { keepTrying: true })
      .catch((e: Error) => this.o.log(`${deploymentId}: relaunch of revision ${revisionId} failed, retrying: ${e.message}`));
  }

  private async remove(deploymentId: string): Promise<void> {
    await this.supervisor.stop(deploymentId);
    if (this.closed) return; // finished by the next start (status stays AWAITING_DELETE)
    await this.store.delete(deploymentId);
    await rm(this.deploymentDir(deploymentId), { recursive: true, force: true });
  }

  private spec(d: DeploymentRecord, rev: RevisionRecord): ServerSpec {
    const dir = this.deploymentDir(d.id);
    mkdirSync(dir, { recursive: true });
    return {
      key: d.id,
      configPath: rev.source_revision_config.langgraph_config_path,
      host: this.o.host,
      port: d.port,
      dataDir: join(dir, "data"),
      env: { ...secretsEnv(rev.secrets), ...this.o.serverEnv(d) },
      extraArgs: this.o.serverArgs(d),
      logFile: join(dir, "server.log"),
    };
  }

  /** Deleted, being deleted, or the control plane is closing: stop walking this deployment. */
  private gone(deploymentId: string): boolean {
    const d = this.store.get(deploymentId);
    return this.closed || !d || d.status === "AWAITING_DELETE";
  }

  private overtaken(deploymentId: string, revisionId: string): boolean {
    return this.store.get(deploymentId)?.latest_revision_id !== revisionId;
  }

  private async skip(deploymentId: string, revisionId: string): Promise<void> {
    const latest = this.store.get(deploymentId)?.latest_revision_id;
    await this.end(deploymentId, revisionId, "SKIPPED", `superseded by revision ${latest} before it was deployed`);
  }

  private async setRev(deploymentId: string, revisionId: string, status: RevisionStatus, message: string | null = null): Promise<void> {
    await this.store.setRevisionStatus(deploymentId, revisionId, status, message);
  }

  /** Ends a revision and sets its deployment's status in one transaction. */
  private end(deploymentId: string, revisionId: string, status: RevisionStatus, message: string | null = null): Promise<void> {
    return this.store.endRevision(deploymentId, revisionId, status, message, (d) => {
      if (d.status === "AWAITING_DELETE") return {};
      if (status === "DEPLOYED") return { active_revision_id: revisionId, status: "READY", image_version: this.o.imageVersion };
      if (d.active_revision_id) return { status: "READY" };
      const pending = this.store.revisions(deploymentId).some((r) => !TERMINAL_REVISION_STATUSES.has(r.status));
      return { status: pending ? "AWAITING_DATABASE" : "UNUSED" };
    });
  }

  private quietly(p: Promise<unknown>): void {
    const w = p.catch((err: unknown) => this.o.log(`record update failed: ${(err as Error)?.message ?? String(err)}`));
    this.writes.add(w);
    void w.finally(() => this.writes.delete(w));
  }
}
