// Deployment and revision records of the control plane (platform.md §1.4–1.5): what is stored in
// LMDB, the status enums, and the wire shapes (secrets masked, internal fields dropped).
import type { JsonObject } from "../../storage/records.ts";

/** Revision statuses in the order the platform publishes them. */
export const REVISION_STATUSES = [
  "CREATING",
  "QUEUED",
  "AWAITING_BUILD",
  "BUILDING",
  "AWAITING_DEPLOY",
  "DEPLOYING",
  "CREATE_FAILED",
  "BUILD_FAILED",
  "DEPLOY_FAILED",
  "DEPLOYED",
  "SKIPPED",
  "INTERRUPTED",
  "UNKNOWN",
] as const;
export type RevisionStatus = (typeof REVISION_STATUSES)[number];

/** A revision in one of these never moves again. */
export const TERMINAL_REVISION_STATUSES: ReadonlySet<RevisionStatus> = new Set<RevisionStatus>([
  "CREATE_FAILED",
  "BUILD_FAILED",
  "DEPLOY_FAILED",
  "DEPLOYED",
  "SKIPPED",
  "INTERRUPTED",
]);

/**
 * AWAITING_DATABASE: no revision has been deployed yet and one is in progress.
 * READY: a revision is serving (its server may be restarting after a crash).
 * UNUSED: nothing serves and nothing is in progress (every revision failed).
 * AWAITING_DELETE: DELETE accepted, the server is being stopped and the records removed.
 * UNKNOWN: reserved (never set by this implementation).
 */
export const DEPLOYMENT_STATUSES = ["AWAITING_DATABASE", "READY", "UNUSED", "AWAITING_DELETE", "UNKNOWN"] as const;
export type DeploymentStatus = (typeof DEPLOYMENT_STATUSES)[number];

/** The only source Troupe builds: a project directory on the control plane's machine. */
export const SOURCES = ["internal_source"] as const;
export type DeploymentSource = (typeof SOURCES)[number];

export interface Secret {
  name: string;
  value: string;
}

export interface SecretReference {
  name: string;
  secret_name: string;
  secret_key: string;
}

export interface SourceRevisionConfig {
  /** absolute path of the service.json / langgraph.json (resolved at request time) */
  langgraph_config_path: string;
}

export interface DeploymentRecord {
  id: string;
  name: string;
  source: DeploymentSource;
  source_config: JsonObject | null;
  /** the latest revision's */
  source_revision_config: SourceRevisionConfig;
  /** the latest revision's (plain text at rest; masked on the wire) */
  secrets: Secret[];
  secret_references: SecretReference[] | null;
  tenant_id: string;
  created_at: string;
  updated_at: string;
  status: DeploymentStatus;
  latest_revision_id: string | null;
  active_revision_id: string | null;
  image_version: string | null;
  display_name: string | null;
  // internal (not on the wire)
  /** allocated once at creation, kept across revisions and restarts: the URL stays stable */
  port: number;
  /** pid of the running deployment server, to reap an orphan after a control-plane crash */
  server_pid: number | null;
}

export interface RevisionRecord {
  id: string;
  deployment_id: string;
  created_at: string;
  updated_at: string;
  status: RevisionStatus;
  source: DeploymentSource;
  source_revision_config: SourceRevisionConfig;
  /** why the revision failed / was skipped, readable; null otherwise */
  status_message: string | null;
  /** crash restarts of this revision's server while it was active */
  restart_count: number;
  // internal (not on the wire)
  /** env vars of this revision's server: kept per revision so a rollback or restart relaunches it as it was */
  secrets: Secret[];
}

export const MASK = "********";

/** Wire form of a deployment: internal fields dropped, secret values masked, `url` added. */
export interface DeploymentWire extends Omit<DeploymentRecord, "port" | "server_pid"> {
  url: string;
}

export type RevisionWire = Omit<RevisionRecord, "secrets" | "deployment_id">;

export function deploymentToWire(d: DeploymentRecord, url: string): DeploymentWire {
  const { port: _port, server_pid: _pid, ...rest } = d;
  return { ...rest, secrets: d.secrets.map((s) => ({ name: s.name, value: MASK })), url };
}

export function revisionToWire(r: RevisionRecord): RevisionWire {
  const { secrets: _secrets, deployment_id: _dep, ...rest } = r;
  return rest;
}
