// Serialization of graph values for the wire, done in the worker so the HTTP thread only moves
// strings: LangChain messages become flat {...fields, type} objects, as upstream emits them.
import { MessageListJson, type MessageFields } from "../storage/message-list-json.ts";

interface MessageLike {
  lc_kwargs: unknown;
  toDict(): { type: string; data: Record<string, unknown> };
}

function isMessage(v: unknown): v is MessageLike {
  return typeof v === "object" && v !== null && "lc_kwargs" in v && typeof (v as { toDict?: unknown }).toDict === "function";
}

/** JSON.stringify replacer; `this[key]` is the value before its toJSON() ran. */
function wireReplacer(this: Record<string, unknown>, key: string, value: unknown): unknown {
  const original = this[key];
  if (isMessage(original)) {
    const d = original.toDict();
    return { ...d.data, type: d.type };
  }
  if (typeof value === "bigint") return value.toString();
  return value;
}

export function toJsonText(value: unknown): string {
  const fast = fastJsonText(value);
  if (fast !== undefined) return fast;
  const text = JSON.stringify(value, wireReplacer);
  return text === undefined ? "null" : text;
}

/*
 * Fast path for long threads: a state ({messages: [...], ...}) or a message list is emitted on
 * every step, so message JSON is cached per message object and per conversation (see
 * storage/message-list-json.ts and its no-in-place-mutation assumption). The output is exactly
 * JSON.stringify(value, wireReplacer)'s.
 */
const MIN_CACHED_MESSAGES = 2;
const wireCache = new MessageListJson();
const messageWireJson = (m: MessageFields): string => JSON.stringify(m, wireReplacer);

function isMessageList(v: unknown): v is (MessageLike & MessageFields)[] {
  return Array.isArray(v) && v.length >= MIN_CACHED_MESSAGES && v.every(isMessage);
}

function messageListJson(list: (MessageLike & MessageFields)[]): string {
  return wireCache.arrayJson(list, messageWireJson);
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const proto: unknown = Object.getPrototypeOf(v);
  return (proto === Object.prototype || proto === null) && typeof (v as { toJSON?: unknown }).toJSON !== "function";
}

/** The wire JSON of a message list or of a plain object holding one; undefined = use the general path. */
function fastJsonText(value: unknown): string | undefined {
  if (isMessageList(value)) return messageListJson(value);
  if (!isPlainObject(value)) return undefined;
  let hasList = false;
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    const v = value[key];
    if (isMessageList(v)) hasList = true;
    else if (typeof v === "object" && v !== null && typeof (v as { toJSON?: unknown }).toJSON === "function") return undefined;
  }
  if (!hasList) return undefined;
  const parts: string[] = [];
  for (const key of Object.keys(value)) {
    const v = value[key];
    const json = isMessageList(v) ? messageListJson(v) : JSON.stringify(v, wireReplacer) as string | undefined;
    if (json !== undefined) parts.push(`${JSON.stringify(key)}:${json}`);
  }
  return `{${parts.join(",")}}`;
}

/** Plain JSON value (for storing in records or merging into replies). */
export function toPlain<T = unknown>(value: unknown): T {
  return JSON.parse(toJsonText(value)) as T;
}

export function errorInfo(err: unknown): { error: string; message: string } {
  if (err instanceof Error) {
    const ctor = err.constructor?.name;
    const name = err.name && err.name !== "Error" ? err.name : ctor && ctor !== "Object" ? ctor : "Error";
    return { error: name, message: err.message };
  }
  return { error: "Error", message: typeof err === "string" ? err : toJsonText(err) };
}
