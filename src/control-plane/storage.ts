// The control plane's own LMDB environment (separate from any deployment's data): organizations,
// users, API keys (hashes only), deployments and revisions, OAuth token records.
// Deployment servers open it read-only-in-practice to check API keys of their organization.
import { open, type Database, type RootDatabase } from "lmdb";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

export interface OrgRecord {
  id: string;
  name: string;
  created_at: string;
}

export interface UserRecord {
  id: string;
  org_id: string;
  name: string;
  created_at: string;
}

export interface ApiKeyRecord {
  /** sha256 hex of the key; the key itself is never stored */
  hash: string;
  /** first characters of the key, for display ("trp_ab12…") */
  prefix: string;
  org_id: string;
  user_id: string;
  created_at: string;
  revoked_at: string | null;
  description: string | null;
}

/** Record shapes of deployments/revisions/tokens are owned by their modules; stored as plain objects. */
export type StoredObject = Record<string, unknown>;

export interface ControlPlaneStorage {
  root: RootDatabase;
  orgs: Database<OrgRecord, string>;
  /** org name -> org id */
  orgNames: Database<string, string>;
  users: Database<UserRecord, string>;
  /** key = sha256 hex of the API key */
  apiKeys: Database<ApiKeyRecord, string>;
  deployments: Database<StoredObject, string>;
  /** key [deployment_id, revision_id] (revision ids are UUID v7: creation order) */
  revisions: Database<StoredObject, [string, string]>;
  tokens: Database<StoredObject, string>;
  close(): Promise<void>;
}

export function openControlPlaneStorage(dir: string): ControlPlaneStorage {
  mkdirSync(dir, { recursive: true });
  const root = open({ path: join(dir, "control-plane.mdb"), maxDbs: 16, mapSize: 16 * 1024 ** 3, noSync: true });
  const db = <V, K extends string | [string, string]>(name: string) => root.openDB<V, K>({ name, encoding: "msgpack" });
  return {
    root,
    orgs: db("orgs"),
    orgNames: db("org_names"),
    users: db("users"),
    apiKeys: db("api_keys"),
    deployments: db("deployments"),
    revisions: db("revisions"),
    tokens: db("tokens"),
    close: () => root.close(),
  };
}
