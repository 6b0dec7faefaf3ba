// Deployment and revision records in the control plane's LMDB env. Reads are synchronous;
// every read-modify-write runs inside one write transaction so concurrent updates (HTTP handlers,
// the rollout lane, crash callbacks) never lose each other's fields.
import { conflict, notFound } from "../../errors.ts";
import { nowIso } from "../../storage/records.ts";
import type { Database } from "lmdb";
import type { ControlPlaneStorage } from "../storage.ts";
import type { DeploymentRecord, DeploymentStatus, RevisionRecord, RevisionStatus } from "./types.ts";

export interface DeploymentFilter {
  tenantId: string;
  nameContains?: string;
  statuses?: readonly string[];
  ids?: readonly string[];
}

export const deploymentNotFound = (id: string) => notFound(`Deployment ID ${id} not found.`);
export const revisionNotFound = (id: string) => notFound(`Revision ID ${id} not found.`);

export class DeploymentStore {
  /** typed views of the shared env's `deployments` and `revisions` DBs (records are plain msgpack objects) */
  private readonly deployments: Database<DeploymentRecord, string>;
  private readonly revs: Database<RevisionRecord, [string, string]>;

  constructor(private readonly s: ControlPlaneStorage) {
    this.deployments = s.deployments as unknown as Database<DeploymentRecord, string>;
    this.revs = s.revisions as unknown as Database<RevisionRecord, [string, string]>;
  }

  get(id: string): DeploymentRecord | undefined {
    return this.deployments.get(id);
  }

  /** The deployment if it exists and belongs to the tenant; 404 otherwise (no existence leak). */
  require(id: string, tenantId: string): DeploymentRecord {
    const d = this.get(id);
    if (!d || d.tenant_id !== tenantId) throw deploymentNotFound(id);
    return d;
  }

  all(): DeploymentRecord[] {
    return [...this.deployments.getRange({})].map((e) => e.value);
  }

  /** Newest first (ids are UUID v7). */
  list(f: DeploymentFilter): DeploymentRecord[] {
    const needle = f.nameContains?.toLowerCase();
    return this.all()
      .filter((d) => d.tenant_id === f.tenantId)
      .filter((d) => !needle || d.name.toLowerCase().includes(needle) || (d.display_name ?? "").toLowerCase().includes(needle))
      .filter((d) => !f.statuses?.length || f.statuses.includes(d.status))
      .filter((d) => !f.ids?.length || f.ids.includes(d.id))
      .sort((a, b) => (a.id < b.id ? 1 : -1));
  }

  /** Creates the deployment and its first revision atomically; the name is unique per tenant. */
  async create(d: DeploymentRecord, r: RevisionRecord): Promise<void> {
    await this.s.root.transaction(() => {
      const clash = this.all().find((x) => x.tenant_id === d.tenant_id && x.name === d.name);
      if (clash) throw conflict(`A deployment named "${d.name}" already exists (${clash.id}).`);
      this.deployments.put(d.id, d);
      this.revs.put([d.id, r.id], r);
    });
  }

  /** Read-modify-write of one deployment; returns the stored result (throws 404 when gone). */
  async update(id: string, change: (d: DeploymentRecord) => Partial<DeploymentRecord>): Promise<DeploymentRecord> {
    return this.s.root.transaction(() => {
      const cur = this.get(id);
      if (!cur) throw deploymentNotFound(id);
      const next: DeploymentRecord = { ...cur, ...change(cur), updated_at: nowIso() };
      this.deployments.put(id, next);
      return next;
    });
  }

  setStatus(id: string, status: DeploymentStatus): Promise<DeploymentRecord> {
    return this.update(id, () => ({ status }));
  }

  /** Adds a revision and makes it the deployment's latest, with the deployment fields it carries. */
  async addRevision(r: RevisionRecord, deploymentChange: Partial<DeploymentRecord> = {}): Promise<DeploymentRecord> {
    return this.s.root.transaction(() => {
      const cur = this.get(r.deployment_id);
      if (!cur) throw deploymentNotFound(r.deployment_id);
      const next: DeploymentRecord = {
        ...cur,
        ...deploymentChange,
        latest_revision_id: r.id,
        source_revision_config: r.source_revision_config,
        secrets: r.secrets,
        updated_at: nowIso(),
      };
      this.revs.put([r.deployment_id, r.id], r);
      this.deployments.put(cur.id, next);
      return next;
    });
  }

  getRevision(deploymentId: string, revisionId: string): RevisionRecord | undefined {
    return this.revs.get([deploymentId, revisionId]);
  }

  requireRevision(deploymentId: string, revisionId: string): RevisionRecord {
    const r = this.getRevision(deploymentId, revisionId);
    if (!r) throw revisionNotFound(revisionId);
    return r;
  }

  /** Newest first. */
  revisions(deploymentId: string, statuses?: readonly string[]): RevisionRecord[] {
    const out: RevisionRecord[] = [];
    for (const { value } of this.revs.getRange({ start: [deploymentId, ""], end: [deploymentId, "\uffff"] })) {
      if (!statuses?.length || statuses.includes(value.status)) out.push(value);
    }
    return out.reverse();
  }

  async updateRevision(deploymentId: string, revisionId: string, change: (r: RevisionRecord) => Partial<RevisionRecord>): Promise<RevisionRecord | undefined> {
    return this.s.root.transaction(() => {
      const cur = this.getRevision(deploymentId, revisionId);
      if (!cur) return undefined;
      const next: RevisionRecord = { ...cur, ...change(cur), updated_at: nowIso() };
      this.revs.put([deploymentId, revisionId], next);
      return next;
    });
  }

  setRevisionStatus(
    deploymentId: string,
    revisionId: string,
    status: RevisionStatus,
    statusMessage: string | null = null,
  ): Promise<RevisionRecord | undefined> {
    return this.updateRevision(deploymentId, revisionId, () => ({ status, status_message: statusMessage }));
  }

  /**
   * Ends a revision and updates its deployment in the same transaction, so a client that sees the
   * revision's final status also sees the deployment that goes with it. `change` runs after the
   * revision is written (it may list revisions).
   */
  async endRevision(
    deploymentId: string,
    revisionId: string,
    status: RevisionStatus,
    statusMessage: string | null,
    change: (d: DeploymentRecord) => Partial<DeploymentRecord>,
  ): Promise<void> {
    await this.s.root.transaction(() => {
      const r = this.getRevision(deploymentId, revisionId);
      const d = this.get(deploymentId);
      if (!r || !d) return;
      this.revs.put([deploymentId, revisionId], { ...r, status, status_message: statusMessage, updated_at: nowIso() });
      this.deployments.put(deploymentId, { ...d, ...change(d), updated_at: nowIso() });
    });
  }

  /** Removes the deployment and all its revisions in one transaction. */
  async delete(id: string): Promise<void> {
    await this.s.root.transaction(() => {
      for (const { key } of this.revs.getRange({ start: [id, ""], end: [id, "\uffff"] })) this.revs.remove(key);
      this.deployments.remove(id);
    });
  }
}
