// Bounded LRU of deserialized checkpoint blobs, so reading a long thread's message list does not
// revive every message again on each run (LangChain `load` dominates the cost otherwise).
import { isLangChainMessage } from "./message-serde.ts";

/*
 * Keyed by the blob's LMDB key; an entry is trusted only when the stamp stored with the blob
 * (blob_stamps, a random number written with every blob) is still the one it was built from, so
 * writes by another saver, worker or process (delete, rollback, re-put under the same key) can
 * never serve a stale value, and a hit reads none of the blob's bytes (which would map them into
 * memory: RssFile). Invalidation on delete only frees memory early.
 * Only arrays of LangChain messages / primitives are cached. They are copied (shallowly) on fill
 * and on every hit, so pushing to / splicing a returned array does not affect the cache.
 * Assumption: messages handed to or returned by the checkpointer are not mutated in place
 * afterwards (LangGraph's messagesStateReducer builds a new array and only assigns ids to
 * messages lacking one; those already carry ids once they are in a checkpoint).
 *
 * Memory: the budget counts an estimate of what an entry really holds — its stored bytes plus the
 * revived messages, key and bookkeeping (measured at 2–4x the stored bytes; see entryCost) — not
 * the stored bytes alone. Lists stored in under MIN_CACHED_BLOB_BYTES are not cached: they
 * revive in well under a millisecond, and every fresh-thread run would otherwise add an entry
 * that is never read again (tens of thousands under load). A newer version of a channel replaces
 * the thread's older one (one entry per thread, namespace and channel), so a long thread holds
 * one list, not one per step.
 */

interface Entry {
  threadId: string;
  /** the blob's full key (its slot plus version and tag) */
  key: string;
  /** stamp of the blob write the value was built from (see lmdb-saver.ts) */
  stamp: number;
  value: unknown[];
  cost: number;
}

/** Estimated memory (stored bytes + revived values) one saver's cache may hold. */
export const DEFAULT_BLOB_CACHE_BYTES = 24 * 1024 * 1024;
/** Smaller stored lists are revived on each read instead of cached. */
export const MIN_CACHED_BLOB_BYTES = 4 * 1024;

/** Separates the slot from [version, tag] in a key; JSON.stringify escapes NUL inside strings. */
const SLOT_END = "\u0000";

/**
 * Estimated bytes an entry keeps alive: the revived values (about as many bytes as stored plus
 * ~200 per message object) and the key/entry bookkeeping; the stored bytes themselves are not
 * held. Measured with JsonPlus message lists (stored bytes + revived): 2 messages (436 stored
 * bytes) hold ~1.8 KB, 50 short messages (11 KB) ~33 KB, 500 messages (109 KB) ~217 KB.
 */
export function entryCost(storedBytes: number, items: number): number {
  return storedBytes + 200 * items + 600;
}

/** The key's [thread, ns, channel] part: the cache holds at most one entry per slot. */
function slotOf(key: string): string {
  const end = key.indexOf(SLOT_END);
  return end < 0 ? key : key.slice(0, end);
}

export class BlobCache {
  /** by slot, least recently used first */
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;

  constructor(
    private readonly maxBytes = DEFAULT_BLOB_CACHE_BYTES,
    private readonly minStoredBytes = MIN_CACHED_BLOB_BYTES,
  ) {}

  static key(threadId: string, ns: string, channel: string, version: unknown, tag: string): string {
    return JSON.stringify([threadId, ns, channel]) + SLOT_END + JSON.stringify([version, tag]);
  }

  /** Whether `value` is a shape this cache keeps. */
  static cacheable(value: unknown): value is unknown[] {
    return Array.isArray(value) && value.length > 0 && value.every((item) => isLangChainMessage(item) || item === null || typeof item !== "object");
  }

  /**
   * The cached value (a fresh shallow copy) if it was built from the blob write that carries
   * `stamp`: a small stored token replaces the byte comparison, so a hit reads no blob bytes
   * (and maps none of them into memory).
   */
  get(key: string, stamp: number | undefined): unknown[] | undefined {
    const slot = slotOf(key);
    const entry = this.entries.get(slot);
    if (entry === undefined || entry.key !== key) return undefined;
    if (entry.stamp !== stamp) {
      this.evict(slot);
      return undefined;
    }
    this.entries.delete(slot);
    this.entries.set(slot, entry);
    return entry.value.slice();
  }

  /** Whether an entry for this blob key is held (its stamp is worth reading). */
  has(key: string): boolean {
    return this.entries.get(slotOf(key))?.key === key;
  }

  /** Whether a blob stored in `storedBytes` bytes could be cached (its stamp is worth reading). */
  accepts(storedBytes: number): boolean {
    return storedBytes >= this.minStoredBytes;
  }

  /**
   * Caches a value just read: only into an empty slot, so reading history (older versions, newest
   * first) never displaces the version the thread's next run reads. Writes use set().
   */
  fill(key: string, threadId: string, stamp: number, storedBytes: number, value: unknown): void {
    if (!this.entries.has(slotOf(key))) this.set(key, threadId, stamp, storedBytes, value);
  }

  /**
   * Whether set() would keep this value (stored in `storedBytes` bytes). `allMessages`: the caller
   * knows every item is a LangChain message, which spares a walk of a long list.
   */
  wouldKeep(storedBytes: number, value: unknown, allMessages = false): value is unknown[] {
    if (!this.accepts(storedBytes) || !Array.isArray(value)) return false;
    if (!(allMessages ? value.length > 0 : BlobCache.cacheable(value))) return false;
    return entryCost(storedBytes, value.length) <= this.maxBytes / 4;
  }

  /** Caches `value`, the blob of `storedBytes` bytes written with `stamp`; holds no copy of the bytes. */
  set(key: string, threadId: string, stamp: number, storedBytes: number, value: unknown): void {
    if (this.wouldKeep(storedBytes, value)) this.setOwned(key, threadId, stamp, storedBytes, value.slice());
  }

  /**
   * set() for a list wouldKeep accepted, already copied by the caller: the cache keeps `list` itself,
   * so nobody may modify it (the cache and pending checkpoints only hand out copies).
   */
  setOwned(key: string, threadId: string, stamp: number, storedBytes: number, list: unknown[]): void {
    const cost = entryCost(storedBytes, list.length);
    const slot = slotOf(key);
    this.evict(slot); // this key's older value, or the slot's older version
    this.entries.set(slot, { threadId, key, stamp, value: list, cost });
    this.bytes += cost;
    for (const oldest of this.entries.keys()) {
      if (this.bytes <= this.maxBytes) break;
      this.evict(oldest);
    }
  }

  /** Forgets the value of this blob key (a newer version of its slot stays). */
  remove(key: string): void {
    const slot = slotOf(key);
    if (this.entries.get(slot)?.key === key) this.evict(slot);
  }

  removeThread(threadId: string): void {
    for (const [slot, entry] of this.entries) if (entry.threadId === threadId) this.evict(slot);
  }

  private evict(slot: string): void {
    const entry = this.entries.get(slot);
    if (entry === undefined) return;
    this.entries.delete(slot);
    this.bytes -= entry.cost;
  }

  get size(): number {
    return this.entries.size;
  }

  /** estimated memory held (see entryCost) */
  get totalBytes(): number {
    return this.bytes;
  }
}
