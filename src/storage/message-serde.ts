// Checkpoint serde wrapper that caches each LangChain message's JSON, so re-putting a long message
// list (every step of a run on a long thread) only serializes the messages that are new.
import { JsonPlusSerializer, type SerializerProtocol } from "@langchain/langgraph-checkpoint";
import { MessageListJson, type MessageFields } from "./message-list-json.ts";
import { CHUNK_ITEMS, MessageChunker, type ChunkedList } from "./message-chunks.ts";

/*
 * Output is byte-identical to the inner serde's: JSON.stringify of an array is "[" + the items'
 * JSON joined by "," + "]", and each item's JSON comes from the inner serde itself.
 * Assumption: a message is not mutated in place after it was serialized (see message-list-json.ts
 * for the edits that are detected).
 */

interface SerializableMessage extends MessageFields {
  toDict(): unknown;
}

export function isLangChainMessage(v: unknown): v is SerializableMessage {
  return typeof v === "object" && v !== null && "lc_kwargs" in v && typeof (v as { toDict?: unknown }).toDict === "function";
}

const MIN_ITEMS = 2;

function isMessageList(value: unknown, minItems: number): value is SerializableMessage[] {
  return Array.isArray(value) && value.length >= minItems && value.every(isLangChainMessage);
}

/** Thrown by arrayJson's compute: every message was to be serialized beforehand. */
class NotPrepared extends Error {}

export class MessageCachingSerde implements SerializerProtocol {
  readonly inner: SerializerProtocol;
  private readonly cache = new MessageListJson();
  private readonly chunker = new MessageChunker();
  private readonly encoder = new TextEncoder();
  private readonly decoder = new TextDecoder();

  constructor(inner?: SerializerProtocol) {
    this.inner = inner ?? new JsonPlusSerializer();
  }

  async dumpsTyped(value: unknown): Promise<[string, Uint8Array]> {
    if (!isMessageList(value, MIN_ITEMS) || !(await this.prepare(value))) return this.inner.dumpsTyped(value);
    try {
      return ["json", this.cache.arrayBytes(value, () => { throw new NotPrepared(); }, this.encoder)];
    } catch (err) {
      // a message changed while the missing ones were serialized: do it the plain way
      if (err instanceof NotPrepared) return this.inner.dumpsTyped(value);
      throw err;
    }
  }

  /**
   * A message list long enough to be stored in chunks (message-chunks.ts), split into them; undefined
   * for any other value, or when a message does not serialize to JSON (then use dumpsTyped).
   */
  async dumpsChunked(value: unknown): Promise<ChunkedList | undefined> {
    if (!Array.isArray(value) || value.length < CHUNK_ITEMS) return undefined;
    // Messages the chunker kept from the conversation's previous list were checked and cached then.
    const kept = this.chunker.keptPrefix(value as MessageFields[]);
    for (let i = kept; i < value.length; i++) {
      const message: unknown = value[i];
      if (!isLangChainMessage(message)) return undefined;
      if (this.cache.lookup(message) === undefined && !(await this.cacheJson(message))) return undefined;
    }
    return this.chunker.split(value as MessageFields[], (m) => this.cache.lookup(m));
  }

  /** Caches the JSON of every message of `list` that has none yet; false if one does not serialize to JSON. */
  private async prepare(list: SerializableMessage[]): Promise<boolean> {
    for (const message of this.cache.missing(list)) if (!(await this.cacheJson(message as SerializableMessage))) return false;
    return true;
  }

  private async cacheJson(message: SerializableMessage): Promise<boolean> {
    const [type, bytes] = await this.inner.dumpsTyped(message);
    if (type !== "json") return false;
    this.cache.store(message, typeof bytes === "string" ? bytes : this.decoder.decode(bytes));
    return true;
  }

  loadsTyped(type: string, data: Uint8Array | string): Promise<unknown> {
    return this.inner.loadsTyped(type, data);
  }
}
