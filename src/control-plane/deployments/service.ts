// The deployment operations behind the HTTP routes: create, patch, redeploy, delete — each stores
// its records first (so the answer reflects them) and hands the slow part to the Deployer.
import { conflict } from "../../errors.ts";
import { nowIso } from "../../storage/records.ts";
import { uuid7 } from "../../util/ids.ts";
import type { Deployer } from "./deployer.ts";
import { allocatePort } from "./ports.ts";
import type { DeploymentStore } from "./store.ts";
import type { DeploymentRecord, RevisionRecord, Secret, SourceRevisionConfig } from "./types.ts";
import type { ProjectRoots } from "./project-roots.ts";
import { checkCreate, planPatch, type CreateRequest, type PatchRequest } from "./validate.ts";

export class DeploymentService {
  /** ports handed out by this process (covers creates racing before their records are stored) */
  private readonly portsGiven = new Set<number>();

  constructor(
    readonly store: DeploymentStore,
    readonly deployer: Deployer,
    private readonly bindHost: string,
    readonly projects: ProjectRoots,
  ) {}

  async create(req: CreateRequest, tenantId: string): Promise<DeploymentRecord> {
    const checked = checkCreate(req, (p) => this.projects.resolveConfigPath(tenantId, p));
    const port = await allocatePort(this.bindHost, new Set([...this.portsGiven, ...this.store.all().map((d) => d.port)]));
    this.portsGiven.add(port);
    const now = nowIso();
    const deploymentId = uuid7();
    const rev = newRevision(deploymentId, checked.sourceRevisionConfig, checked.secrets);
    const d: DeploymentRecord = {
      id: deploymentId,
      name: req.name,
      source: "internal_source",
      source_config: req.source_config ?? null,
      source_revision_config: rev.source_revision_config,
      secrets: rev.secrets,
      secret_references: req.secret_references ?? null,
      tenant_id: tenantId,
      created_at: now,
      updated_at: now,
      status: "AWAITING_DATABASE",
      latest_revision_id: rev.id,
      active_revision_id: null,
      image_version: null,
      display_name: null,
      port,
      server_pid: null,
    };
    await this.store.create(d, rev);
    void this.deployer.submit(deploymentId, rev.id);
    return d;
  }

  async patch(id: string, req: PatchRequest, tenantId: string): Promise<DeploymentRecord> {
    const cur = this.store.require(id, tenantId);
    if (cur.status === "AWAITING_DELETE") throw deletingConflict(id);
    const plan = planPatch(req, cur, (p) => this.projects.resolveConfigPath(tenantId, p));
    const inPlace: Partial<DeploymentRecord> = {};
    if (plan.displayName !== undefined) inPlace.display_name = plan.displayName;
    if (plan.sourceConfig !== undefined) inPlace.source_config = plan.sourceConfig;
    if (!plan.revision) return Object.keys(inPlace).length ? this.store.update(id, () => inPlace) : cur;
    const rev = newRevision(id, plan.revision.sourceRevisionConfig, plan.revision.secrets);
    const d = await this.store.addRevision(rev, { ...inPlace, ...(cur.active_revision_id ? {} : { status: "AWAITING_DATABASE" }) });
    void this.deployer.submit(id, rev.id);
    return d;
  }

  /** Redeploying revision X makes a new revision with X's config and secrets (history is never rewritten). */
  async redeploy(id: string, revisionId: string, tenantId: string): Promise<DeploymentRecord> {
    const cur = this.store.require(id, tenantId);
    if (cur.status === "AWAITING_DELETE") throw deletingConflict(id);
    const from = this.store.requireRevision(id, revisionId);
    const rev = newRevision(id, from.source_revision_config, from.secrets);
    const d = await this.store.addRevision(rev, cur.active_revision_id ? {} : { status: "AWAITING_DATABASE" });
    void this.deployer.submit(id, rev.id);
    return d;
  }

  async delete(id: string, tenantId: string): Promise<void> {
    this.store.require(id, tenantId);
    await this.deployer.delete(id);
  }
}

function newRevision(deploymentId: string, src: SourceRevisionConfig, secrets: Secret[]): RevisionRecord {
  const now = nowIso();
  return {
    id: uuid7(),
    deployment_id: deploymentId,
    created_at: now,
    updated_at: now,
    status: "CREATING",
    source: "internal_source",
    source_revision_config: src,
    status_message: null,
    restart_count: 0,
    secrets,
  };
}

const deletingConflict = (id: string) => conflict(`Deployment ID ${id} is being deleted.`);
