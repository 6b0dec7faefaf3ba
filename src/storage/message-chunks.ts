// Long message lists stored as shared chunks: a blob holds the ids of its leading full chunks of
// CHUNK_ITEMS messages plus the remaining messages' JSON, and each chunk is stored once per
// (thread, namespace, channel) under the hash of its bytes. A list that grows by appending writes
// only its tail and the chunks completed since the previous version, so a thread's history costs
// O(messages) bytes on disk instead of O(messages²), and a step writes O(new messages) bytes.
/*
 * Byte format: the blob's full JSON is "[" + chunk₁ + "," + … + chunkₖ + ("," + tail if tail is
 * not empty) + "]", where each chunk and the tail are the items' JSON joined by "," — exactly what
 * the inner serde writes for the whole array (MessageCachingSerde's own invariant), so reading
 * reassembles the bytes and hands them to the serde unchanged.
 * Lifetime: chunks are immutable and content-addressed; whoever removes blobs of a thread removes
 * the chunks no remaining blob of that thread references, in the same transaction
 * (LmdbCheckpointSaver: deleteThread, pruneToLatest, deleteCheckpointsOfRun).
 */
import { createHash } from "node:crypto";

/** Messages per chunk: a blob is chunked once it holds at least this many messages. */
export const CHUNK_ITEMS = 64;

export interface MessageChunk {
  /** hash of `bytes` (hex): the chunk's key within its thread, namespace and channel */
  id: string;
  bytes: Uint8Array;
}

export interface ChunkedList {
  chunks: MessageChunk[];
  /** the messages after the last full chunk, JSON joined by "," (empty when none) */
  tail: Uint8Array;
  /** total stored bytes (chunks + tail), for cache cost estimates */
  byteLength: number;
}

interface CachedChunk {
  members: object[];
  jsons: string[];
  chunk: MessageChunk;
}

const COMMA = 0x2c;
const OPEN = 0x5b;
const CLOSE = 0x5d;

/**
 * Splits message lists into chunks, remembering each chunk by its first message so an unchanged
 * chunk is neither re-encoded nor re-hashed on the next step.
 */
export class MessageChunker {
  private readonly byFirst = new WeakMap<object, CachedChunk>();
  private readonly encoder = new TextEncoder();

  /** `jsonOf` returns each message's JSON (as the inner serde writes it), or undefined to give up. */
  split(list: object[], jsonOf: (m: object) => string | undefined): ChunkedList | undefined {
    const full = Math.floor(list.length / CHUNK_ITEMS);
    if (full === 0) return undefined;
    const chunks: MessageChunk[] = [];
    let byteLength = 0;
    for (let c = 0; c < full; c++) {
      const start = c * CHUNK_ITEMS;
      const jsons = new Array<string>(CHUNK_ITEMS);
      for (let j = 0; j < CHUNK_ITEMS; j++) {
        const json = jsonOf(list[start + j]);
        if (json === undefined) return undefined;
        jsons[j] = json;
      }
      const cached = this.byFirst.get(list[start]);
      let chunk: MessageChunk;
      if (cached !== undefined && sameChunk(cached, list, start, jsons)) {
        chunk = cached.chunk;
      } else {
        const bytes = this.encoder.encode(jsons.join(","));
        chunk = { id: createHash("sha256").update(bytes).digest("hex").slice(0, 32), bytes };
        this.byFirst.set(list[start], { members: list.slice(start, start + CHUNK_ITEMS), jsons, chunk });
      }
      chunks.push(chunk);
      byteLength += chunk.bytes.byteLength;
    }
    const rest: string[] = [];
    for (let i = full * CHUNK_ITEMS; i < list.length; i++) {
      const json = jsonOf(list[i]);
      if (json === undefined) return undefined;
      rest.push(json);
    }
    const tail = this.encoder.encode(rest.join(","));
    return { chunks, tail, byteLength: byteLength + tail.byteLength };
  }
}

function sameChunk(cached: CachedChunk, list: object[], start: number, jsons: string[]): boolean {
  for (let j = 0; j < CHUNK_ITEMS; j++) {
    if (cached.members[j] !== list[start + j] || cached.jsons[j] !== jsons[j]) return false;
  }
  return true;
}

/** The full JSON array bytes of a chunked blob from its chunks' bytes (in order) and its tail. */
export function joinChunks(chunks: Uint8Array[], tail: Uint8Array): Uint8Array {
  let size = 2 + (tail.byteLength > 0 ? tail.byteLength + 1 : 0);
  for (const c of chunks) size += c.byteLength + 1;
  size -= 1; // one comma fewer than parts
  const out = new Uint8Array(size);
  out[0] = OPEN;
  let at = 1;
  chunks.forEach((c, i) => {
    if (i > 0) out[at++] = COMMA;
    out.set(c, at);
    at += c.byteLength;
  });
  if (tail.byteLength > 0) {
    out[at++] = COMMA;
    out.set(tail, at);
    at += tail.byteLength;
  }
  out[at] = CLOSE;
  return out;
}
