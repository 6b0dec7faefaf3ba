// API key checks with a short positive cache. A miss re-reads LMDB from a fresh snapshot
// (resetReadTxn), so keys created by another process are usable at once; a cached hit is
// trusted for at most cacheTtlMs, which bounds how long a revoked key keeps working.
import type { AuthStore, KeyIdentity } from "./store.ts";

export interface KeyVerifierOptions {
  /** how long a valid key is trusted without re-reading LMDB; 0 = never cached */
  cacheTtlMs: number;
  /** cache entries kept at most (oldest dropped first) */
  maxEntries?: number;
}

interface Cached {
  identity: KeyIdentity;
  expiresAtMs: number;
}

export class KeyVerifier {
  private readonly cache = new Map<string, Cached>();
  private readonly maxEntries: number;

  constructor(
    private readonly store: AuthStore,
    private readonly opts: KeyVerifierOptions,
  ) {
    this.maxEntries = opts.maxEntries ?? 10_000;
  }

  verify(key: string): KeyIdentity | null {
    const now = Date.now();
    const hit = this.cache.get(key);
    if (hit) {
      if (hit.expiresAtMs > now) return hit.identity;
      this.cache.delete(key);
    }
    this.store.refresh();
    const identity = this.store.verify(key);
    if (identity && this.opts.cacheTtlMs > 0) {
      if (this.cache.size >= this.maxEntries) this.cache.delete(this.cache.keys().next().value as string);
      this.cache.set(key, { identity, expiresAtMs: now + this.opts.cacheTtlMs });
    }
    return identity;
  }

  /** Verifies against a fresh LMDB snapshot, bypassing the cache (and dropping a revoked key from it). */
  verifyFresh(key: string): KeyIdentity | null {
    this.cache.delete(key);
    return this.verify(key);
  }

  /** Forget cached keys (after an in-process revocation). */
  clear(): void {
    this.cache.clear();
  }
}

/** The credential of a request: X-Api-Key, or (when allowed) `Authorization: Bearer <key>`. */
export function presentedKey(headers: Record<string, string>, allowBearer: boolean): string | undefined {
  const key = headers["x-api-key"]?.trim();
  if (key) return key;
  if (!allowBearer) return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(headers.authorization ?? "");
  return m?.[1];
}
