// A2A wire dialects. The method family a client calls (v1.0 `SendMessage` … or v0.3
// `message/send` …) decides how every object in the answer is spelled: enum casing, `kind`
// discriminators and part encoding. Everything A2A emits goes through these helpers.

export type Dialect = "v1" | "v0.3";

/** A2A-specific JSON-RPC error codes (reference §4.1); the generic ones live in jsonrpc.ts. */
export const A2A_ERRORS = {
  TASK_NOT_FOUND: -32001,
  TASK_NOT_CANCELABLE: -32002,
  PUSH_NOT_SUPPORTED: -32003,
  UNSUPPORTED_OPERATION: -32004,
  CONTENT_TYPE_NOT_SUPPORTED: -32005,
  INVALID_AGENT_RESPONSE: -32006,
} as const;

export type TaskState = "submitted" | "working" | "input-required" | "completed" | "canceled" | "failed" | "rejected" | "auth-required";
export const TERMINAL_STATES: ReadonlySet<TaskState> = new Set(["completed", "canceled", "failed", "rejected"]);

export type Role = "user" | "agent";

export type Operation = "send" | "stream" | "get" | "cancel" | "list" | "card";

export const METHODS: Readonly<Record<string, { op: Operation; dialect: Dialect }>> = {
  SendMessage: { op: "send", dialect: "v1" },
  SendStreamingMessage: { op: "stream", dialect: "v1" },
  GetTask: { op: "get", dialect: "v1" },
  CancelTask: { op: "cancel", dialect: "v1" },
  ListTasks: { op: "list", dialect: "v1" },
  GetExtendedAgentCard: { op: "card", dialect: "v1" },
  "message/send": { op: "send", dialect: "v0.3" },
  "message/stream": { op: "stream", dialect: "v0.3" },
  "tasks/get": { op: "get", dialect: "v0.3" },
  "tasks/cancel": { op: "cancel", dialect: "v0.3" },
  "agent/getAuthenticatedExtendedCard": { op: "card", dialect: "v0.3" },
};

/** v1.0 enum names follow the protobuf definitions (TASK_STATE_CANCELLED is spelled with two Ls there). */
const V1_STATE: Record<TaskState, string> = {
  submitted: "TASK_STATE_SUBMITTED",
  working: "TASK_STATE_WORKING",
  "input-required": "TASK_STATE_INPUT_REQUIRED",
  completed: "TASK_STATE_COMPLETED",
  canceled: "TASK_STATE_CANCELLED",
  failed: "TASK_STATE_FAILED",
  rejected: "TASK_STATE_REJECTED",
  "auth-required": "TASK_STATE_AUTH_REQUIRED",
};

export const stateName = (d: Dialect, s: TaskState): string => (d === "v1" ? V1_STATE[s] : s);
export const roleName = (d: Dialect, r: Role): string => (d === "v1" ? (r === "user" ? "ROLE_USER" : "ROLE_AGENT") : r);

/** Parse a state filter written in either dialect (`working`, `TASK_STATE_WORKING`, `TASK_STATE_CANCELED`). */
export function parseState(s: string): TaskState | undefined {
  const lower = s
    .toLowerCase()
    .replace(/^task_state_/, "")
    .replace(/_/g, "-");
  const norm = lower === "cancelled" ? "canceled" : lower;
  return norm in V1_STATE ? (norm as TaskState) : undefined;
}

/** `{kind}` discriminator: present in v0.3 objects, absent in v1.0 (oneof wrappers instead). */
export const kind = (d: Dialect, k: string): { kind?: string } => (d === "v0.3" ? { kind: k } : {});

export type Part = Record<string, unknown>;

export const textPart = (d: Dialect, text: string): Part => (d === "v1" ? { text } : { kind: "text", text });
export const dataPart = (d: Dialect, data: unknown): Part => (d === "v1" ? { data } : { kind: "data", data });

export interface FileRef {
  url?: string;
  /** base64 */
  bytes?: string;
  mimeType?: string;
  name?: string;
}

export function filePart(d: Dialect, f: FileRef): Part {
  if (d === "v1") {
    return {
      ...(f.url !== undefined ? { url: f.url } : { raw: f.bytes ?? "" }),
      ...(f.mimeType ? { mediaType: f.mimeType } : {}),
      ...(f.name ? { filename: f.name } : {}),
    };
  }
  return {
    kind: "file",
    file: {
      ...(f.url !== undefined ? { uri: f.url } : { bytes: f.bytes ?? "" }),
      ...(f.mimeType ? { mimeType: f.mimeType } : {}),
      ...(f.name ? { name: f.name } : {}),
    },
  };
}

export interface A2AMessage {
  messageId: string;
  role: Role;
  parts: Part[];
  contextId?: string;
  taskId?: string;
}

export function encodeMessage(d: Dialect, m: A2AMessage): Record<string, unknown> {
  return {
    ...kind(d, "message"),
    messageId: m.messageId,
    role: roleName(d, m.role),
    parts: m.parts,
    ...(m.contextId ? { contextId: m.contextId } : {}),
    ...(m.taskId ? { taskId: m.taskId } : {}),
  };
}

/** Streaming results: v0.3 sends the object itself (with `kind`), v1.0 wraps it in a oneof field. */
export function streamResult(d: Dialect, type: "task" | "status-update" | "artifact-update", obj: Record<string, unknown>): Record<string, unknown> {
  if (d === "v0.3") return obj;
  const field = type === "task" ? "task" : type === "status-update" ? "statusUpdate" : "artifactUpdate";
  return { [field]: obj };
}
