// A2A messages ↔ LangGraph state: an inbound A2A message (either dialect's part encoding)
// becomes graph input (text/file parts → one human message, data parts merged in), and
// LangChain messages from thread values become A2A messages for task history and artifacts.
import type { Json, JsonObject } from "../../storage/records.ts";
import { uuid7 } from "../../util/ids.ts";
import { A2A_ERRORS, dataPart, filePart, textPart, type Dialect, type FileRef, type Part, type Role } from "./dialects.ts";
import { isRecord, RPC, RpcError } from "../jsonrpc.ts";

type Block = JsonObject;

export interface InboundMessage {
  messageId: string;
  role: Role;
  contextId?: unknown;
  taskId?: unknown;
  texts: string[];
  files: FileRef[];
  /** content blocks in part order (text + file), used when files are present */
  blocks: Block[];
  data: JsonObject;
}

const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

function readFile(p: Record<string, unknown>): FileRef | undefined {
  // v0.3: {kind:"file", file:{uri|bytes, mimeType, name}}; v1.0: {url|raw, mediaType, filename}
  const f = isRecord(p.file) ? p.file : p;
  const url = str(f.uri) ?? str(f.url);
  const bytes = str(f.bytes) ?? str(f.raw);
  if (url === undefined && bytes === undefined) return undefined;
  return {
    url,
    bytes: url === undefined ? bytes : undefined,
    mimeType: str(f.mimeType) ?? str(f.mediaType) ?? str(p.mediaType),
    name: str(f.name) ?? str(f.filename) ?? str(p.filename),
  };
}

function fileBlock(f: FileRef): Block {
  const type = f.mimeType?.startsWith("image/") ? "image" : "file";
  return {
    type,
    ...(f.url !== undefined ? { url: f.url } : { data: f.bytes ?? "" }),
    ...(f.mimeType ? { mimeType: f.mimeType } : {}),
    ...(f.name ? { metadata: { filename: f.name } } : {}),
  };
}

export function readMessage(raw: unknown): InboundMessage {
  if (!isRecord(raw)) throw new RpcError(RPC.INVALID_PARAMS, "Invalid params: message is required");
  const parts = raw.parts;
  if (!Array.isArray(parts) || parts.length === 0) throw new RpcError(RPC.INVALID_PARAMS, "Invalid params: message.parts must be a non-empty array");
  const roleRaw = str(raw.role)?.toLowerCase() ?? "user";
  const role: Role = roleRaw === "agent" || roleRaw === "role_agent" ? "agent" : "user";
  const m: InboundMessage = {
    messageId: str(raw.messageId) ?? uuid7(),
    role,
    contextId: raw.contextId,
    taskId: raw.taskId,
    texts: [],
    files: [],
    blocks: [],
    data: {},
  };
  for (const p of parts) {
    if (!isRecord(p)) throw new RpcError(RPC.INVALID_PARAMS, "Invalid params: every part must be an object");
    const k = str(p.kind);
    if (k === "text" || (k === undefined && typeof p.text === "string")) {
      const text = str(p.text);
      if (text === undefined) throw new RpcError(RPC.INVALID_PARAMS, "Invalid params: a text part must carry its text as a string");
      m.texts.push(text);
      m.blocks.push({ type: "text", text });
    } else if (k === "data" || (k === undefined && p.data !== undefined)) {
      const d = p.data;
      if (!isRecord(d)) throw new RpcError(RPC.INVALID_PARAMS, "Invalid params: a data part must carry a JSON object");
      Object.assign(m.data, d);
    } else if (k === "file" || (k === undefined && (p.file !== undefined || p.url !== undefined || p.raw !== undefined))) {
      const f = readFile(p);
      if (!f) throw new RpcError(RPC.INVALID_PARAMS, "Invalid params: a file part needs a uri/url or bytes/raw");
      m.files.push(f);
      m.blocks.push(fileBlock(f));
    } else {
      throw new RpcError(A2A_ERRORS.CONTENT_TYPE_NOT_SUPPORTED, `Content type not supported: part ${k ? `kind "${k}"` : JSON.stringify(Object.keys(p))}`);
    }
  }
  return m;
}

export const hasMessageContent = (m: InboundMessage): boolean => m.texts.length > 0 || m.files.length > 0;

/** Graph input: data parts merged into the object; text/file parts become one message appended to `messages`. */
export function toGraphInput(m: InboundMessage): JsonObject {
  const input: JsonObject = { ...m.data };
  if (hasMessageContent(m)) {
    const content: Json = m.files.length ? m.blocks : m.texts.join("\n");
    // a fresh LangChain id: reusing the client's messageId would let a careless client overwrite
    // earlier turns (add_messages replaces by id); the A2A id rides along for history output
    const msg: JsonObject = { role: m.role === "agent" ? "assistant" : "human", content, id: uuid7(), additional_kwargs: { a2a_message_id: m.messageId } };
    input.messages = [...(Array.isArray(input.messages) ? input.messages : []), msg];
  }
  return input;
}

/** Value to resume an interrupted graph with: the data parts if any, else the text. */
export function resumeValue(m: InboundMessage): Json {
  if (Object.keys(m.data).length) return m.data;
  return m.texts.join("\n");
}

// ---- outbound ------------------------------------------------------------------------------

/** A message as stored in thread values (plain LangChain shape, or a role/content dict). */
export type PlainMessage = Record<string, unknown>;

export function messagesOf(values: unknown): PlainMessage[] {
  const msgs = isRecord(values) ? values.messages : undefined;
  return Array.isArray(msgs) ? msgs.filter(isRecord) : [];
}

export function messageType(m: PlainMessage): string {
  const t = str(m.type) ?? str(m.role) ?? "";
  return t === "user" ? "human" : t === "assistant" ? "ai" : t;
}

export const roleOf = (m: PlainMessage): Role => (messageType(m) === "human" ? "user" : "agent");

/** A2A message id of a stored message: the client's messageId when it came in over A2A, else the LangChain id. */
export function a2aMessageId(m: PlainMessage): string | undefined {
  const kw = m.additional_kwargs;
  if (isRecord(kw) && typeof kw.a2a_message_id === "string") return kw.a2a_message_id;
  return typeof m.id === "string" ? m.id : undefined;
}

/** The text of a message's content (string, or the text blocks of a block list). */
export function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((b) => (typeof b === "string" ? b : isRecord(b) && b.type === "text" && typeof b.text === "string" ? b.text : "")).join("");
}

export function partsOf(d: Dialect, m: PlainMessage): Part[] {
  const parts: Part[] = [];
  const c = m.content;
  if (typeof c === "string") {
    if (c !== "") parts.push(textPart(d, c));
  } else if (Array.isArray(c)) {
    for (const b of c) {
      if (typeof b === "string") parts.push(textPart(d, b));
      else if (isRecord(b) && b.type === "text" && typeof b.text === "string") parts.push(textPart(d, b.text));
      else if (isRecord(b) && (b.type === "image" || b.type === "file") && (typeof b.url === "string" || typeof b.data === "string")) {
        parts.push(filePart(d, { url: str(b.url), bytes: str(b.data), mimeType: str(b.mimeType) ?? str(b.mime_type) }));
      } else if (b !== null && b !== undefined) parts.push(dataPart(d, b));
    }
  }
  const toolCalls = m.tool_calls;
  if (Array.isArray(toolCalls) && toolCalls.length) parts.push(dataPart(d, { tool_calls: toolCalls }));
  if (messageType(m) === "tool" && parts.length === 0 && c !== undefined) parts.push(dataPart(d, { content: c }));
  return parts;
}
