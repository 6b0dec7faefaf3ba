// Serialization of graph values for the wire, done in the worker so the HTTP thread only moves
// strings: LangChain messages become flat {...fields, type} objects, as upstream emits them.

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
  const text = JSON.stringify(value, wireReplacer);
  return text === undefined ? "null" : text;
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
