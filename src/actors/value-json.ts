// Serialization of graph values for the wire, done in the worker so the HTTP thread only moves
// strings: LangChain messages become flat {...fields, type} objects, as upstream emits them.
import { MessageListJson, type MessageFields } from "../storage/message-list-json.ts";
import type { DeferredEventData } from "./event-gate.ts";
import type { JsonSegments } from "../bridge/json-segments.ts";

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
  const pieces = fastJsonPieces(value, messageListJson);
  if (pieces === undefined) return generalJson(value);
  // Concatenated with +, not joined: join() copies a long list's JSON into one flat string (a
  // large-object allocation per step on a long thread); + keeps V8's string tree, which is only
  // flattened if somebody reads the text (most values events of background runs are never sent).
  let text = "";
  for (const piece of pieces) text += piece;
  return text;
}

/**
 * toJsonText's text as segments (concatenated, they are exactly that text), for values that cross
 * threads or go to disk: a long message list contributes one segment per 64 messages, so its JSON
 * never exists as one string in the worker (see MessageListJson.arraySegments).
 */
export function toJsonSegments(value: unknown): JsonSegments {
  return fastJsonPieces(value, (list) => wireCache.arraySegments(list, isMessage, messageWireJson)) ?? [generalJson(value)];
}

/** Bytes a deferred array is counted as per item before it is serialized (a short message's JSON). */
const ESTIMATED_ITEM_BYTES = 128;
/**
 * Smaller states are serialized at once: it is cheap, and a snapshot would keep the run's objects
 * alive in the gate (5 s after the run) where the JSON is a few hundred bytes. A long thread's
 * objects are alive in its state anyway.
 */
const DEFER_MIN_BYTES = 32 * 1024;

/**
 * toJsonText of `value`, computed when it is read (event-gate.ts) if it is a large plain object.
 * That is snapshot now (copied, its arrays sliced), so appending to, replacing or removing from
 * its lists later does not show; an object edited in place later does, as it would to an
 * in-process stream reader. Anything else is serialized now.
 */
export function deferredJsonText(value: unknown): string | DeferredEventData {
  if (!isPlainObject(value)) return toJsonText(value);
  let estimate = 2;
  for (const key of Object.keys(value)) {
    const v = value[key];
    estimate += key.length + 4 + (Array.isArray(v) ? v.length * ESTIMATED_ITEM_BYTES : typeof v === "string" ? v.length : 16);
  }
  if (estimate < DEFER_MIN_BYTES) return toJsonText(value);
  const snapshot: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    const v = value[key];
    snapshot[key] = Array.isArray(v) ? v.slice() : v;
  }
  return { estimate, render: () => toJsonText(snapshot) };
}

function generalJson(value: unknown): string {
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
/** How deep stringifiesAsIs looks before leaving a value to the replacer. */
const MAX_PLAIN_DEPTH = 16;

/**
 * Whether JSON.stringify writes `value` exactly as it does with wireReplacer: nothing in it is a
 * bigint or an object with a prototype or toJSON of its own (a message, a Date). Then the message
 * is stringified without the replacer, which V8 runs several times faster (no call per key).
 */
function stringifiesAsIs(value: unknown, depth: number): boolean {
  if (typeof value === "bigint") return false;
  if (typeof value !== "object" || value === null) return true;
  if (depth >= MAX_PLAIN_DEPTH) return false;
  if (Array.isArray(value)) {
    for (const item of value) if (!stringifiesAsIs(item, depth + 1)) return false;
    return true;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  if ((proto !== Object.prototype && proto !== null) || "toJSON" in value) return false;
  for (const key in value) if (!stringifiesAsIs((value as Record<string, unknown>)[key], depth + 1)) return false;
  return true;
}

const messageWireJson = (m: MessageFields): string => {
  const d = (m as unknown as MessageLike).toDict();
  const flat = { ...d.data, type: d.type };
  return stringifiesAsIs(flat, 0) ? JSON.stringify(flat) : JSON.stringify(m, wireReplacer);
};

/**
 * Whether `v` may be a message list worth the cache: long enough, and its first item a message.
 * The cache checks every item as it goes (see MessageListJson.arrayJson), which costs no extra
 * walk of a long list; this guess only keeps other arrays away from it.
 */
function mayBeMessageList(v: unknown): v is unknown[] {
  return Array.isArray(v) && v.length >= MIN_CACHED_MESSAGES && isMessage(v[0]);
}

function messageListJson(list: unknown[]): string[] | undefined {
  const json = wireCache.arrayJson(list, isMessage, messageWireJson);
  return json === undefined ? undefined : [json];
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const proto: unknown = Object.getPrototypeOf(v);
  return (proto === Object.prototype || proto === null) && typeof (v as { toJSON?: unknown }).toJSON !== "function";
}

/** The keys of a plain object whose values may be message lists; undefined if none, or if the fast path does not apply. */
function messageListKeys(value: unknown): Set<string> | undefined {
  if (!isPlainObject(value)) return undefined;
  let lists: Set<string> | undefined;
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    const v = value[key];
    if (mayBeMessageList(v)) (lists ??= new Set()).add(key);
    else if (typeof v === "object" && v !== null && typeof (v as { toJSON?: unknown }).toJSON === "function") return undefined;
  }
  return lists;
}

/**
 * The wire JSON of a message list or of a plain object holding one, as pieces to concatenate (each
 * list as `listPieces` renders it, undefined when it is not all messages after all); undefined =
 * use the general path. A value's JSON written on its own is what JSON.stringify writes for it
 * inside its object: wireReplacer reads the value from its holder either way, and values with a
 * toJSON of their own (which is told its key) send the object to the general path.
 */
function fastJsonPieces(value: unknown, listPieces: (list: unknown[]) => string[] | undefined): string[] | undefined {
  if (Array.isArray(value)) return mayBeMessageList(value) ? listPieces(value) : undefined;
  const lists = messageListKeys(value);
  if (lists === undefined) return undefined;
  const object = value as Record<string, unknown>;
  const out = ["{"];
  for (const key of Object.keys(object)) {
    const v = object[key];
    const separator = out.length > 1 ? "," : "";
    const pieces = lists.has(key) ? listPieces(v as unknown[]) : undefined;
    if (pieces !== undefined) {
      out.push(`${separator}${JSON.stringify(key)}:`, ...pieces);
    } else {
      const json = JSON.stringify(v, wireReplacer) as string | undefined;
      if (json !== undefined) out.push(`${separator}${JSON.stringify(key)}:${json}`);
    }
  }
  out.push("}");
  return out;
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
