// OAuth token records in the control plane's LMDB env. Every operation is scoped to the owner
// (org + user): another user's token behaves exactly like a missing one. Changes that touch the
// default flag clear it on the owner's other tokens of the provider in the same write transaction.
import { TroupeError, notFound } from "../../errors.ts";
import { nowIso } from "../../storage/records.ts";
import { uuid7 } from "../../util/ids.ts";
import type { Caller } from "../auth/caller.ts";
import type { ControlPlaneStorage, StoredObject } from "../storage.ts";
import { ENCRYPTION_KEY_ENV, type TokenCipher } from "./cipher.ts";
import type { TokenCreate, TokenMetadataUpdate, TokenRecord, TokenSecrets } from "./types.ts";

const tokenNotFound = (id: string) => notFound(`Token ${id} not found`);
const aadOf = (r: Pick<TokenRecord, "id" | "org_id" | "owner_user_id" | "provider_id">) => `${r.id}\n${r.org_id}\n${r.owner_user_id}\n${r.provider_id}`;

export class TokenStore {
  constructor(
    private readonly s: ControlPlaneStorage,
    private readonly cipher: TokenCipher | null,
  ) {}

  private all(): TokenRecord[] {
    return [...this.s.tokens.getRange({})].map((e) => e.value as unknown as TokenRecord);
  }

  private owned(owner: Caller, r: TokenRecord | undefined): r is TokenRecord {
    return r !== undefined && r.owner_user_id === owner.userId && r.org_id === owner.orgId;
  }

  private put(r: TokenRecord): void {
    this.s.tokens.put(r.id, r as unknown as StoredObject);
  }

  /** Inside a write transaction: unset is_default on the owner's other tokens of the provider. */
  private clearOtherDefaults(r: TokenRecord, now: string): void {
    for (const o of this.all()) {
      if (o.id !== r.id && o.is_default && o.provider_id === r.provider_id && o.owner_user_id === r.owner_user_id && o.org_id === r.org_id) {
        this.put({ ...o, is_default: false, updated_at: now });
      }
    }
  }

  /** The owner's tokens (optionally of one provider), oldest first (ids are UUID v7). */
  list(owner: Caller, providerId?: string): TokenRecord[] {
    return this.all().filter((r) => this.owned(owner, r) && (providerId === undefined || r.provider_id === providerId));
  }

  get(owner: Caller, id: string): TokenRecord {
    const r = this.s.tokens.get(id) as unknown as TokenRecord | undefined;
    if (!this.owned(owner, r)) throw tokenNotFound(id);
    return r;
  }

  exists(owner: Caller, providerId: string): boolean {
    return this.all().some((r) => this.owned(owner, r) && r.provider_id === providerId);
  }

  async create(owner: Caller, c: TokenCreate): Promise<TokenRecord> {
    if (!this.cipher) {
      throw new TroupeError(
        "UNAVAILABLE",
        `Token storage is not configured: set ${ENCRYPTION_KEY_ENV} (32 bytes, base64 or hex) on the control plane to store OAuth tokens encrypted`,
      );
    }
    if (c.expires_at != null && c.expires_in_seconds != null) {
      throw new TroupeError("VALIDATION", "Give expires_at or expires_in_seconds, not both", {
        issues: [{ loc: ["body", "expires_in_seconds"], msg: "Give expires_at or expires_in_seconds, not both", type: "value_error" }],
      });
    }
    const now = nowIso();
    const expiresAt =
      c.expires_at != null
        ? new Date(c.expires_at).toISOString()
        : c.expires_in_seconds != null
          ? new Date(Date.now() + c.expires_in_seconds * 1000).toISOString()
          : null;
    const base = { id: uuid7(), org_id: owner.orgId, owner_user_id: owner.userId, provider_id: c.provider_id };
    const secrets: TokenSecrets = { access_token: c.access_token, refresh_token: c.refresh_token ?? null };
    const record: TokenRecord = {
      ...base,
      provider_account_label: c.provider_account_label ?? null,
      scopes: c.scopes ?? [],
      expires_at: expiresAt,
      is_default: c.is_default ?? true,
      created_at: now,
      updated_at: now,
      secret: this.cipher.seal(JSON.stringify(secrets), aadOf(base)),
    };
    await this.s.root.transaction(() => {
      if (record.is_default) this.clearOtherDefaults(record, now);
      this.put(record);
    });
    return record;
  }

  async updateMetadata(owner: Caller, id: string, u: TokenMetadataUpdate): Promise<TokenRecord> {
    return this.s.root.transaction(() => {
      const cur = this.s.tokens.get(id) as unknown as TokenRecord | undefined;
      if (!this.owned(owner, cur)) throw tokenNotFound(id);
      const now = nowIso();
      const next: TokenRecord = { ...cur, updated_at: now };
      if (u.provider_account_label !== undefined) next.provider_account_label = u.provider_account_label;
      if (u.is_default !== undefined && u.is_default !== null) next.is_default = u.is_default;
      if (next.is_default) this.clearOtherDefaults(next, now);
      this.put(next);
      return next;
    });
  }

  async delete(owner: Caller, id: string): Promise<void> {
    await this.s.root.transaction(() => {
      if (!this.owned(owner, this.s.tokens.get(id) as unknown as TokenRecord | undefined)) throw tokenNotFound(id);
      this.s.tokens.remove(id);
    });
  }

  /** Deletes all the owner's tokens of a provider; returns how many went. */
  async deleteByProvider(owner: Caller, providerId: string): Promise<number> {
    return this.s.root.transaction(() => {
      const mine = this.list(owner, providerId);
      for (const r of mine) this.s.tokens.remove(r.id);
      return mine.length;
    });
  }

  /** The decrypted secrets, for server-side use only (never sent by any route). */
  readSecrets(owner: Caller, id: string): TokenSecrets {
    const r = this.get(owner, id);
    if (!this.cipher) throw new TroupeError("UNAVAILABLE", `Token secrets cannot be read: ${ENCRYPTION_KEY_ENV} is not set`);
    return JSON.parse(this.cipher.open(r.secret, aadOf(r))) as TokenSecrets;
  }
}
