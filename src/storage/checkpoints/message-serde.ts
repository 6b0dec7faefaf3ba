// Checkpoint serde wrapper that caches each LangChain message's JSON, so re-putting a long message
// list (every step of a run on a long thread) only serializes the messages that are new.
import { JsonPlusSerializer, type SerializerProtocol } from "@langchain/langgraph-checkpoint";
import { MessageListJson, type MessageFields } from "../message-list-json.ts";
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

/** Deeper values take the inner serde's path (also what bounds a cycle). */
const MAX_PLAIN_DEPTH = 32;

/**
 * JSON data JsonPlus writes exactly as JSON.stringify does: null, booleans, strings, finite
 * numbers, arrays and plain objects of those. Not undefined (JsonPlus writes a marker for it),
 * nor class instances, toJSON, Dates, Maps, Sets, typed arrays.
 */
function isPlainJson(value: unknown, depth: number): boolean {
  switch (typeof value) {
    case "string":
    case "boolean":
      return true;
    case "number":
      return Number.isFinite(value);
    case "object": {
      if (value === null) return true;
      if (depth >= MAX_PLAIN_DEPTH) return false;
      if (Array.isArray(value)) {
        for (const item of value) if (!isPlainJson(item, depth + 1)) return false;
        return true;
      }
      const proto: unknown = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) return false;
      if ("toJSON" in value) return false;
      for (const key in value) {
        if (!isPlainJson((value as Record<string, unknown>)[key], depth + 1)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

/** Thrown by arrayJson's compute: every message was to be serialized beforehand. */
class NotPrepared extends Error {}

export class MessageCachingSerde implements SerializerProtocol {
  readonly inner: SerializerProtocol;
  private readonly cache = new MessageListJson();
  private readonly chunker = new MessageChunker();
  private readonly encoder = new TextEncoder();
  private readonly decoder = new TextDecoder();

  /** the inner serde is (a copy of) LangGraph's JsonPlusSerializer, whose format the plain-JSON shortcuts reproduce */
  private readonly innerIsJsonPlus: boolean;

  constructor(inner?: SerializerProtocol) {
    this.inner = inner ?? new JsonPlusSerializer();
    this.innerIsJsonPlus = this.inner.constructor.name === JsonPlusSerializer.name;
  }

  async dumpsTyped(value: unknown): Promise<[string, Uint8Array]> {
    if (this.innerIsJsonPlus && isPlainJson(value, 0)) return ["json", this.encoder.encode(JSON.stringify(value))];
    if (!isMessageList(value, MIN_ITEMS) || !(await this.prepare(value))) return this.inner.dumpsTyped(value);
    try {
      return [
        "json",
        this.cache.arrayBytes(
          value,
          () => {
            throw new NotPrepared();
          },
          this.encoder,
        ),
      ];
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
    // A step appends: the JSON of the trailing messages that have none is made first, so the
    // chunker can measure what it kept and split with no await in between (one walk of the list).
    for (let i = value.length - 1; i >= 0; i--) {
      const message: unknown = value[i];
      if (!isLangChainMessage(message)) return undefined;
      if (this.cache.lookup(message) !== undefined) break;
      if (!(await this.cacheJson(message))) return undefined;
    }
    const kept = this.chunker.keptPrefix(value as MessageFields[]);
    const appended = this.chunker.split(value as MessageFields[], (m) => this.cache.lookup(m), kept);
    if (appended !== undefined) return appended;
    // A message before those has no JSON either (edited, or a list new to the chunker): make the
    // JSON of every one after what the chunker kept (those were checked and cached when kept),
    // then let split measure again, as there were awaits since.
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
    if (this.innerIsJsonPlus && type === "json") {
      const text = typeof data === "string" ? data : this.decoder.decode(data);
      // JsonPlus' reviver only rebuilds objects carrying an "lc" key (LangChain objects, Set, Map,
      // undefined, ...); any other JSON revives to exactly what JSON.parse returns
      if (!text.includes('"lc"')) return Promise.resolve(JSON.parse(text) as unknown);
      return this.inner.loadsTyped(type, text);
    }
    return this.inner.loadsTyped(type, data);
  }
}
