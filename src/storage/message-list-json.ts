// Incremental JSON for message lists: each message's JSON is cached per message object, and the
// joined JSON of the last list seen (per first message) is reused when a list only appends to it.
/*
 * Used for checkpoint blobs (message-serde.ts) and wire chunks (actors/value-json.ts), where a long
 * thread's whole history is re-serialized on every step. Assumption: a message is not mutated in
 * place once serialized; a changed id, content or lc_kwargs object is detected (that covers
 * messagesStateReducer assigning a missing id), other in-place edits are not.
 */

import { MessageListSnapshot, type MessageFields } from "./message-list-snapshot.ts";

export type { MessageFields } from "./message-list-snapshot.ts";

interface ItemEntry {
  json: string;
  id: unknown;
  content: unknown;
  kwargs: unknown;
}

interface ListEntry {
  list: MessageListSnapshot;
  /** the items' JSON joined by "," */
  body: string;
  /** `body` UTF-8 encoded, once arrayBytes made it */
  bytes?: Uint8Array;
  /**
   * The JSON of each full group of SEGMENT_ITEMS leading items, joined by ","; every group but the
   * first starts with its "," separator. Filled by arraySegments. Kept with the separator so the
   * segments handed out are the same strings on every call: a "," + group made per call would be
   * a fresh rope, flattened (copied) again by whoever encodes it.
   */
  sealed: string[];
}

/** Items per sealed segment: ~64 messages keep a segment well below V8's large-object size. */
export const SEGMENT_ITEMS = 64;

/** A list's reusable prefix: its conversation's last entry, if the list extends it, and that entry's length. */
interface Reusable {
  last: ListEntry | undefined;
  from: number;
}

const OPEN = 0x5b; // [
const CLOSE = 0x5d; // ]

export class MessageListJson {
  private readonly items = new WeakMap<object, ItemEntry>();
  /** keyed by the list's first message: one entry per conversation */
  private readonly lists = new WeakMap<object, ListEntry>();

  /** The cached JSON of one message, if it is still valid. */
  lookup(m: MessageFields): string | undefined {
    const hit = this.items.get(m);
    return hit !== undefined && hit.id === m.id && hit.content === m.content && hit.kwargs === m.lc_kwargs ? hit.json : undefined;
  }

  store(m: MessageFields, json: string): void {
    this.items.set(m, { json, id: m.id, content: m.content, kwargs: m.lc_kwargs });
  }

  /** Messages of `list` whose JSON arrayJson would have to compute (so async producers can fill them first). */
  missing(list: MessageFields[]): MessageFields[] {
    const { from } = this.reusable(list);
    const out: MessageFields[] = [];
    for (let i = from; i < list.length; i++) if (this.lookup(list[i]) === undefined) out.push(list[i]);
    return out;
  }

  /**
   * "[" + every item's JSON joined by "," + "]", or undefined (and nothing recorded) when an item
   * fails `isItem`. `compute` makes the JSON of a message not cached yet. Only the items after
   * the prefix this cache already holds are asked `isItem` (those passed when they were recorded),
   * so a long list is walked once, not once more to check it.
   */
  arrayJson(list: unknown[], isItem: (v: unknown) => v is MessageFields, compute: (m: MessageFields) => string): string | undefined {
    const found = this.reusableIf(list, isItem);
    return found && `[${this.update(list as MessageFields[], compute, found).entry.body}]`;
  }

  /**
   * arrayJson as segments whose concatenation is the text: "[", one string per sealed group of
   * SEGMENT_ITEMS items, the rest, "]". A long list's JSON then never has to exist as one string
   * (V8 allocates strings over 128 KiB one by one in fresh pages, which costs ~1 ms here per copy).
   */
  arraySegments(list: unknown[], isItem: (v: unknown) => v is MessageFields, compute: (m: MessageFields) => string): string[] | undefined {
    const found = this.reusableIf(list, isItem);
    return found && this.segmentsOf(this.update(list as MessageFields[], compute, found).entry, compute);
  }

  private segmentsOf(entry: ListEntry, compute: (m: MessageFields) => string): string[] {
    this.seal(entry, compute); // only here: callers that never ask for segments keep no sealed copies
    const out = ["["];
    for (const segment of entry.sealed) out.push(segment);
    const from = entry.sealed.length * SEGMENT_ITEMS;
    const { messages } = entry.list;
    if (from < messages.length) {
      const open: string[] = [];
      for (let i = from; i < messages.length; i++) open.push(this.jsonOf(messages[i], compute));
      out.push(from === 0 ? open.join(",") : `,${open.join(",")}`);
    }
    out.push("]");
    return out;
  }

  /** arrayJson UTF-8 encoded; an append only encodes the new messages (the rest is a byte copy). */
  arrayBytes(list: MessageFields[], compute: (m: MessageFields) => string, encoder: TextEncoder): Uint8Array {
    const { entry, previous, rest } = this.update(list, compute);
    const head = previous?.bytes;
    if (head === undefined) {
      const out = encoder.encode(`[${entry.body}]`);
      entry.bytes = out.subarray(1, out.length - 1);
      return out;
    }
    const tail = rest === "" ? new Uint8Array(0) : encoder.encode(head.length === 0 ? rest : `,${rest}`);
    const out = new Uint8Array(head.length + tail.length + 2);
    out[0] = OPEN;
    out.set(head, 1);
    out.set(tail, 1 + head.length);
    out[out.length - 1] = CLOSE;
    entry.bytes = out.subarray(1, out.length - 1);
    return out;
  }

  /**
   * `reused`: reusable(list), measured by the caller with nothing in between (no await, no call
   * that could edit the list).
   */
  private update(
    list: MessageFields[],
    compute: (m: MessageFields) => string,
    reused?: Reusable,
  ): { entry: ListEntry; previous: { bytes?: Uint8Array } | undefined; rest: string } {
    if (list.length === 0) return { entry: { list: new MessageListSnapshot(), body: "", sealed: [] }, previous: undefined, rest: "" };
    const { last, from } = reused ?? this.reusable(list);
    const parts = new Array<string>(list.length - from);
    for (let i = from; i < list.length; i++) parts[i - from] = this.jsonOf(list[i], compute);
    const rest = parts.join(",");
    if (last !== undefined) {
      // The list extends the conversation's last one: extend that entry in place. Copying its
      // columns would make every step O(messages) in allocations on a long thread.
      const previous = { bytes: last.bytes };
      last.list.record(list, from);
      if (rest !== "") {
        last.body = last.body === "" ? rest : `${last.body},${rest}`;
        last.bytes = undefined;
      }
      return { entry: last, previous, rest };
    }
    const entry: ListEntry = { list: new MessageListSnapshot(), body: rest, sealed: [] };
    entry.list.record(list, 0);
    this.lists.set(list[0], entry);
    return { entry, previous: undefined, rest };
  }

  /** Seals every full group of SEGMENT_ITEMS items not sealed yet (each item's JSON is cached by now). */
  private seal(entry: ListEntry, compute: (m: MessageFields) => string): void {
    const { messages } = entry.list;
    while ((entry.sealed.length + 1) * SEGMENT_ITEMS <= messages.length) {
      const start = entry.sealed.length * SEGMENT_ITEMS;
      const jsons = new Array<string>(SEGMENT_ITEMS);
      for (let j = 0; j < SEGMENT_ITEMS; j++) jsons[j] = this.jsonOf(messages[start + j], compute);
      const group = jsons.join(",");
      entry.sealed.push(entry.sealed.length === 0 ? group : `,${group}`);
    }
  }

  private jsonOf(m: MessageFields, compute: (m: MessageFields) => string): string {
    let json = this.lookup(m);
    if (json === undefined) {
      json = compute(m);
      this.store(m, json);
    }
    return json;
  }

  /** reusable(list) if every item after the reused prefix passes `isItem`; undefined otherwise. */
  private reusableIf(list: unknown[], isItem: (v: unknown) => v is MessageFields): Reusable | undefined {
    const items = list as MessageFields[]; // checked below, but for the prefix that reusable() matched to recorded items
    const found = this.reusable(items);
    for (let i = found.from; i < items.length; i++) if (!isItem(items[i])) return undefined;
    return found;
  }

  /** The last list of this conversation, when `list` starts with all of it (unchanged); `from` = its length. */
  private reusable(list: MessageFields[]): Reusable {
    const last = list.length === 0 ? undefined : this.lists.get(list[0]);
    if (last === undefined || last.list.sharedPrefix(list) < last.list.length) return { last: undefined, from: 0 };
    return { last, from: last.list.length };
  }
}
