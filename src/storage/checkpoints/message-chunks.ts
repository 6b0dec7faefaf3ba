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
import { MessageListSnapshot, type MessageFields } from "../message-list-snapshot.ts";

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

/** What the chunker knows of the last list it split in one conversation: the list, its JSON, its full chunks. */
interface ConversationState {
  list: MessageListSnapshot;
  jsons: string[];
  chunks: MessageChunk[];
}

const COMMA = 0x2c;
const OPEN = 0x5b;
const CLOSE = 0x5d;

/**
 * Splits message lists into chunks. It keeps the last list split per conversation (keyed by its
 * first message), so a list that extends it — every step of a run on a long thread — costs one
 * identity/field comparison per kept message and work only for the new ones: no per-message cache
 * lookups, no re-encoding or re-hashing of chunks it already made.
 */
export class MessageChunker {
  private readonly conversations = new WeakMap<object, ConversationState>();
  private readonly encoder = new TextEncoder();

  /**
   * How many leading messages of `list` are unchanged since the last list of its conversation was
   * split (0 when none was). Messages from there on are the ones split() will ask `jsonOf` for.
   */
  keptPrefix(list: MessageFields[]): number {
    const state = list.length === 0 ? undefined : this.conversations.get(list[0]);
    return state === undefined ? 0 : state.list.sharedPrefix(list);
  }

  /**
   * `jsonOf` returns each message's JSON (as the inner serde writes it), or undefined to give up;
   * it is called only for messages after `keptPrefix(list)` (`keptHint`: that number, measured
   * by the caller with no await since).
   */
  split(list: MessageFields[], jsonOf: (m: MessageFields) => string | undefined, keptHint?: number): ChunkedList | undefined {
    const full = Math.floor(list.length / CHUNK_ITEMS);
    if (full === 0) return undefined;
    const kept = keptHint ?? this.keptPrefix(list);
    const fresh: string[] = [];
    for (let i = kept; i < list.length; i++) {
      const json = jsonOf(list[i]);
      if (json === undefined) return undefined;
      fresh.push(json);
    }
    // The state is updated in place (truncate to what is kept, append the rest): copying it would
    // make every step O(messages) again. Only `chunks` escapes, and it is copied on the way out.
    let state = this.conversations.get(list[0]);
    if (state === undefined) {
      state = { list: new MessageListSnapshot(), jsons: [], chunks: [] };
      this.conversations.set(list[0], state);
    }
    state.list.record(list, kept);
    state.jsons.length = kept;
    for (const json of fresh) state.jsons.push(json);
    const { jsons, chunks } = state;
    chunks.length = Math.min(Math.floor(kept / CHUNK_ITEMS), full);
    let byteLength = 0;
    for (const chunk of chunks) byteLength += chunk.bytes.byteLength;
    for (let c = chunks.length; c < full; c++) {
      const bytes = this.encoder.encode(jsons.slice(c * CHUNK_ITEMS, (c + 1) * CHUNK_ITEMS).join(","));
      chunks.push({ id: createHash("sha256").update(bytes).digest("hex").slice(0, 32), bytes });
      byteLength += bytes.byteLength;
    }
    const tail = this.encoder.encode(jsons.slice(full * CHUNK_ITEMS).join(","));
    return { chunks: chunks.slice(), tail, byteLength: byteLength + tail.byteLength };
  }
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
