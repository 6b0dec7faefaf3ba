// Organizations (tenants), their users and API keys in the control plane's LMDB env. Used by the
// control plane routes, the `troupe keys` CLI (another process, same files) and the key checks.
// Every read-modify-write runs in one write transaction, so the CLI and a running control plane
// can create orgs and keys at the same time without duplicates.
import { TroupeError, conflict, notFound } from "../../errors.ts";
import { nowIso } from "../../storage/records.ts";
import { isUuid, uuid5, uuid7 } from "../../util/ids.ts";
import type { ApiKeyRecord, ControlPlaneStorage, OrgRecord, UserRecord } from "../storage.ts";
import { generateApiKey, hashApiKey, isWellFormedApiKey } from "./api-key.ts";

/** An org created through the API remembers the org that created it: that org may mint its keys. */
export interface StoredOrg extends OrgRecord {
  created_by_org?: string | null;
}

export interface KeyIdentity {
  org_id: string;
  user_id: string;
  prefix: string;
}

export interface CreatedApiKey {
  /** the secret itself: shown once, never stored */
  key: string;
  record: ApiKeyRecord;
}

/** Public view of a key (no hash, no secret). */
export interface ApiKeySummary {
  prefix: string;
  org_id: string;
  user_id: string;
  user_name: string | null;
  description: string | null;
  created_at: string;
  revoked_at: string | null;
}

const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
/** Namespace of user ids: uuid5(org_id + "/" + user name), so "ensure user" is idempotent. */
const USER_NAMESPACE = "2f1c8a52-7b0e-4d3a-9c6e-5e1f0b7d9a41";

export const DEFAULT_USER = "default";

export function checkName(kind: "organization" | "user", name: string): void {
  if (!NAME_RE.test(name) || isUuid(name)) {
    throw new TroupeError("VALIDATION", `Invalid ${kind} name "${name}"`, {
      issues: [
        {
          loc: ["body", kind === "organization" ? "name" : "user"],
          msg: "Use 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit (not a UUID)",
          type: "value_error",
        },
      ],
    });
  }
}

export class AuthStore {
  constructor(private readonly s: ControlPlaneStorage) {}

  /** Sees commits made by other processes (the CLI, another control plane) since the last read. */
  refresh(): void {
    this.s.root.resetReadTxn();
  }

  getOrg(id: string): StoredOrg | undefined {
    return this.s.orgs.get(id) as StoredOrg | undefined;
  }

  /** By id or by name. */
  findOrg(idOrName: string): StoredOrg | undefined {
    const byId = isUuid(idOrName) ? this.getOrg(idOrName) : undefined;
    if (byId) return byId;
    const id = this.s.orgNames.get(idOrName);
    return id === undefined ? undefined : this.getOrg(id);
  }

  async createOrg(name: string, createdByOrg: string | null = null): Promise<StoredOrg> {
    checkName("organization", name);
    return this.s.root.transaction(() => {
      if (this.s.orgNames.get(name) !== undefined) throw conflict(`Organization "${name}" already exists`);
      return this.insertOrg(name, createdByOrg);
    });
  }

  /** The org named `name`, created when missing (CLI bootstrap). */
  async ensureOrg(name: string): Promise<{ org: StoredOrg; created: boolean }> {
    checkName("organization", name);
    return this.s.root.transaction(() => {
      const id = this.s.orgNames.get(name);
      const existing = id === undefined ? undefined : this.getOrg(id);
      return existing ? { org: existing, created: false } : { org: this.insertOrg(name, null), created: true };
    });
  }

  private insertOrg(name: string, createdByOrg: string | null): StoredOrg {
    const org: StoredOrg = { id: uuid7(), name, created_at: nowIso(), created_by_org: createdByOrg };
    this.s.orgs.put(org.id, org);
    this.s.orgNames.put(name, org.id);
    return org;
  }

  getUser(id: string): UserRecord | undefined {
    return this.s.users.get(id);
  }

  userId(orgId: string, name: string): string {
    return uuid5(`${orgId}/${name}`, USER_NAMESPACE);
  }

  /** The user `name` of the org, created when missing. */
  async ensureUser(orgId: string, name: string): Promise<UserRecord> {
    checkName("user", name);
    const id = this.userId(orgId, name);
    return this.s.root.transaction(() => {
      if (!this.getOrg(orgId)) throw notFound(`Organization ${orgId} not found`);
      const existing = this.getUser(id);
      if (existing) return existing;
      const user: UserRecord = { id, org_id: orgId, name, created_at: nowIso() };
      this.s.users.put(id, user);
      return user;
    });
  }

  async createKey(orgId: string, userId: string, description: string | null = null): Promise<CreatedApiKey> {
    const { key, hash, prefix } = generateApiKey();
    const record: ApiKeyRecord = { hash, prefix, org_id: orgId, user_id: userId, created_at: nowIso(), revoked_at: null, description };
    await this.s.root.transaction(() => {
      const user = this.getUser(userId);
      if (!user || user.org_id !== orgId) throw notFound(`User ${userId} not found in organization ${orgId}`);
      this.s.apiKeys.put(hash, record);
    });
    return { key, record };
  }

  /**
   * A key minted through the API: for user `name` of the org, created with the user when missing.
   * An existing user must be `selfUserId` (the caller): a key for someone else would let the caller
   * act as them (e.g. read their OAuth tokens). One transaction, so two callers cannot both claim a new user.
   */
  async createKeyForUser(orgId: string, name: string, selfUserId: string | null, description: string | null): Promise<CreatedApiKey> {
    checkName("user", name);
    const userId = this.userId(orgId, name);
    const { key, hash, prefix } = generateApiKey();
    const record: ApiKeyRecord = { hash, prefix, org_id: orgId, user_id: userId, created_at: nowIso(), revoked_at: null, description };
    await this.s.root.transaction(() => {
      if (!this.getOrg(orgId)) throw notFound(`Organization ${orgId} not found`);
      if (this.getUser(userId)) {
        if (userId !== selfUserId)
          throw new TroupeError("FORBIDDEN", `User "${name}" already exists: only that user (or the \`troupe keys\` CLI) can create keys for it`);
      } else {
        this.s.users.put(userId, { id: userId, org_id: orgId, name, created_at: record.created_at });
      }
      this.s.apiKeys.put(hash, record);
    });
    return { key, record };
  }

  /** Keys of an org (revoked ones included), oldest first. */
  listKeys(orgId: string): ApiKeySummary[] {
    const out: ApiKeySummary[] = [];
    for (const { value } of this.s.apiKeys.getRange({})) {
      if (value.org_id !== orgId) continue;
      out.push({
        prefix: value.prefix,
        org_id: value.org_id,
        user_id: value.user_id,
        user_name: this.getUser(value.user_id)?.name ?? null,
        description: value.description,
        created_at: value.created_at,
        revoked_at: value.revoked_at,
      });
    }
    return out.sort((a, b) => a.created_at.localeCompare(b.created_at));
  }

  /** Revokes the org's key with this display prefix (idempotent). Returns the revoked record. */
  async revokeKey(orgId: string, prefix: string): Promise<ApiKeyRecord> {
    return this.s.root.transaction(() => {
      const matches = [...this.s.apiKeys.getRange({})].filter((e) => e.value.org_id === orgId && e.value.prefix === prefix);
      if (matches.length === 0) throw notFound(`API key ${prefix}… not found`);
      if (matches.length > 1) throw conflict(`Several API keys start with ${prefix}; revoke cannot choose`);
      const { key, value } = matches[0];
      if (value.revoked_at) return value;
      const next: ApiKeyRecord = { ...value, revoked_at: nowIso() };
      this.s.apiKeys.put(key, next);
      return next;
    });
  }

  /** The identity of a valid, unrevoked key; null otherwise. Reads the current read snapshot. */
  verify(key: string): KeyIdentity | null {
    if (!isWellFormedApiKey(key)) return null;
    const rec = this.s.apiKeys.get(hashApiKey(key));
    if (!rec || rec.revoked_at) return null;
    return { org_id: rec.org_id, user_id: rec.user_id, prefix: rec.prefix };
  }
}
