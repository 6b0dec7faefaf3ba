// Store item TTLs (config `store.ttl`, `ttl` on PUT /store/items): the `store_ttl` DB holds, per
// item key, its TTL in minutes and when it expires. Readers hide expired items (store.ts); the
// HTTP thread's sweep removes them. Kept apart from store.ts so the sweep does not load LangGraph's
// BaseStore (and @langchain/core) into the HTTP thread.
import type { Storage } from "./env.ts";
import { removeStoreItem } from "./indexes/store-items.ts";

type StoreKey = [string, string];

/** Whether the item at `key` has a TTL that ran out. */
export function itemExpired(s: Storage, key: StoreKey, now: number): boolean {
  const t = s.storeTtl.get(key);
  return t !== undefined && t.expiresAt <= now;
}

/** Pushes the expiry of these items (those with a TTL) out by their TTL again; not awaited by readers. */
export function refreshItemTtls(s: Storage, keys: readonly StoreKey[]): void {
  const now = Date.now();
  const due: [StoreKey, { minutes: number; expiresAt: number }][] = [];
  for (const k of keys) {
    const t = s.storeTtl.get(k);
    if (t !== undefined) due.push([k, { minutes: t.minutes, expiresAt: now + t.minutes * 60_000 }]);
  }
  if (due.length === 0) return;
  void s.root
    .transaction(() => {
      // only items that still have a TTL (a write or delete may have come first)
      for (const [k, t] of due) if (s.storeTtl.doesExist(k)) s.storeTtl.put(k, t);
    })
    .catch(() => undefined);
}

/** Removes up to `limit` expired items with their TTL records; returns how many. */
export async function sweepExpiredItems(s: Storage, limit: number): Promise<number> {
  s.root.resetReadTxn();
  const now = Date.now();
  const expired: StoreKey[] = [];
  for (const { key, value } of s.storeTtl.getRange({})) {
    if (value.expiresAt <= now) expired.push(key as StoreKey);
    if (expired.length >= limit) break;
  }
  if (expired.length === 0) return 0;
  let removed = 0;
  await s.root.transaction(() => {
    for (const k of expired) {
      const t = s.storeTtl.get(k);
      if (t === undefined || t.expiresAt > now) continue; // refreshed or rewritten meanwhile
      const item = s.store.get(k);
      if (item !== undefined) removeStoreItem(s, item);
      s.storeTtl.remove(k);
      s.storeVectors.remove(k);
      removed++;
    }
  });
  return removed;
}
