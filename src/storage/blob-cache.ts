// Bounded LRU of deserialized checkpoint blobs, so reading a long thread's message list does not
// revive every message again on each run (LangChain `load` dominates the cost otherwise).
import { isLangChainMessage } from "./message-serde.ts";

/*
 * Keyed by the blob's LMDB key; an entry is trusted only when the bytes stored in LMDB still
 * equal the bytes it was built from, so writes by another saver, worker or process (delete,
 * rollback, re-put under the same key) can never serve a stale value. Invalidation on delete
 * only frees memory early.
 * Only arrays of LangChain messages / primitives are cached. They are copied (shallowly) on fill
 * and on every hit, so pushing to / splicing a returned array does not affect the cache.
 * Assumption: messages handed to or returned by the checkpointer are not mutated in place
 * afterwards (LangGraph's messagesStateReducer builds a new array and only assigns ids to
 * messages lacking one; those already carry ids once they are in a checkpoint).
 */

interface Entry {
  threadId: string;
  type: string;
  bytes: Uint8Array;
  value: unknown[];
}

export const DEFAULT_BLOB_CACHE_BYTES = 24 * 1024 * 1024;

export class BlobCache {
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;

  constructor(private readonly maxBytes = DEFAULT_BLOB_CACHE_BYTES) {}

  static key(threadId: string, ns: string, channel: string, version: unknown, tag: string): string {
    return JSON.stringify([threadId, ns, channel, version, tag]);
  }

  /** Whether `value` is a shape this cache keeps. */
  static cacheable(value: unknown): value is unknown[] {
    return Array.isArray(value) && value.length > 0 && value.every((item) => isLangChainMessage(item) || item === null || typeof item !== "object");
  }

  /** The cached value (a fresh shallow copy) if it was built from exactly these stored bytes. */
  get(key: string, type: string, stored: Uint8Array): unknown[] | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.type !== type || !bytesEqual(entry.bytes, stored)) {
      this.remove(key);
      return undefined;
    }
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.value.slice();
  }

  set(key: string, threadId: string, type: string, bytes: Uint8Array, value: unknown): void {
    if (!BlobCache.cacheable(value) || bytes.byteLength > this.maxBytes / 4) return;
    this.remove(key);
    this.entries.set(key, { threadId, type, bytes, value: value.slice() });
    this.bytes += bytes.byteLength;
    for (const [oldest, entry] of this.entries) {
      if (this.bytes <= this.maxBytes) break;
      this.entries.delete(oldest);
      this.bytes -= entry.bytes.byteLength;
    }
  }

  remove(key: string): void {
    const entry = this.entries.get(key);
    if (entry === undefined) return;
    this.entries.delete(key);
    this.bytes -= entry.bytes.byteLength;
  }

  removeThread(threadId: string): void {
    for (const [key, entry] of this.entries) if (entry.threadId === threadId) this.remove(key);
  }

  get size(): number {
    return this.entries.size;
  }

  get totalBytes(): number {
    return this.bytes;
  }
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.byteLength === b.byteLength && Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
}
