// The one list of domain errors. Domain code (storage, actors, runtime) throws TroupeError
// with a stable code; only src/http/errors.ts maps codes to HTTP statuses.

export const ERROR_CODES = {
  NOT_FOUND: "resource does not exist",
  CONFLICT: "resource already exists or is in a conflicting state",
  THREAD_BUSY: "the thread has a run in flight and the request needs it idle",
  MULTITASK_REJECTED: "a run is in flight and multitask_strategy is reject",
  VALIDATION: "request body, query or path failed validation",
  BAD_REQUEST: "request is well-formed but cannot be processed",
  MALFORMED_JSON: "request body is not valid JSON",
  PAYLOAD_TOO_LARGE: "request body exceeds the size limit",
  URI_TOO_LONG: "request target (path and query) exceeds the length limit",
  UNSUPPORTED_MEDIA_TYPE: "request content type is not supported",
  UNAUTHORIZED: "missing or invalid credentials",
  FORBIDDEN: "credentials do not allow this operation",
  RATE_LIMITED: "identity exceeded its rate limit",
  GRAPH_NOT_FOUND: "no graph registered with that id",
  GRAPH_LOAD_FAILED: "the graph module could not be loaded",
  METHOD_NOT_ALLOWED: "the path exists but not for this method",
  UPGRADE_REQUIRED: "the route speaks WebSocket and the request is no upgrade",
  NOT_IMPLEMENTED: "feature not available in this build",
  UNAVAILABLE: "the service is shutting down or a worker is restarting",
  ASSISTANT_CHANGED: "the assistant changed since a cache read it (a run create, retried from a fresh read; never sent)",
  INTERNAL: "unexpected failure",
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

/** One validation issue, already in the wire shape of HTTPValidationError items. */
export interface ValidationIssue {
  loc: (string | number)[];
  msg: string;
  type: string;
}

export class TroupeError extends Error {
  readonly code: ErrorCode;
  readonly issues?: ValidationIssue[];
  readonly headers?: Record<string, string>;

  constructor(code: ErrorCode, message: string, opts: { issues?: ValidationIssue[]; headers?: Record<string, string>; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = "TroupeError";
    this.code = code;
    this.issues = opts.issues;
    this.headers = opts.headers;
  }
}

/** A 422 with the given issues (also thrown outside the HTTP layer: cron schedules, store namespaces). */
export function validationError(issues: ValidationIssue[]): TroupeError {
  return new TroupeError("VALIDATION", issues.map((i) => `${i.loc.join(".")}: ${i.msg}`).join("; "), { issues });
}

export const notFound = (message: string) => new TroupeError("NOT_FOUND", message);
export const conflict = (message: string) => new TroupeError("CONFLICT", message);
export const badRequest = (message: string) => new TroupeError("BAD_REQUEST", message);

// The messages clients match on (the JS server's texts, docs/ERRORS.md), written once.
export const threadNotFound = (threadId: string) => notFound(`Thread with ID ${threadId} not found`);
export const assistantNotFound = () => notFound("Assistant not found");
export const runNotFound = () => notFound("Run not found");
export const cronNotFound = (cronId: string) => notFound(`Cron with ID ${cronId} not found`);
export const checkpointNotFound = (checkpointId: string, threadId: string) => notFound(`Checkpoint ${checkpointId} not found on thread ${threadId}`);
/** No graph registered under that id; `registered` lists the ids there are. */
export const graphNotFound = (graphId: string, registered?: Iterable<string>) =>
  new TroupeError("GRAPH_NOT_FOUND", `Graph "${graphId}" not found${registered ? `. Registered graphs: ${[...registered].join(", ")}` : ""}`);
/** An assistant whose graph this server does not have (its config changed since the assistant was made). */
export const graphNotRegistered = (graphId: string, assistantId: string) =>
  notFound(`Graph "${graphId}" of assistant ${assistantId} is not registered on this server`);
/** A run naming an assistant (or graph) id that resolves to none. */
export const noAssistantFor = (assistantId: string) =>
  notFound(`No assistant found for "${assistantId}". Make sure the assistant ID is for a valid assistant or a valid graph ID.`);

/** A run create refused: its assistant, answered from a cache, was changed or deleted since (AssistantsPort.forRun). */
export const assistantChanged = (assistantId: string) =>
  new TroupeError("ASSISTANT_CHANGED", `Assistant ${assistantId} changed since this server read it; the run was not created`);

/** Serializable form for crossing thread boundaries (Error objects lose their class). */
export interface SerializedError {
  code: ErrorCode;
  message: string;
  stack?: string;
  issues?: ValidationIssue[];
}

export function serializeError(err: unknown): SerializedError {
  if (err instanceof TroupeError) return { code: err.code, message: err.message, stack: err.stack, issues: err.issues };
  if (err instanceof Error) return { code: "INTERNAL", message: err.message, stack: err.stack };
  return { code: "INTERNAL", message: String(err) };
}

export function deserializeError(e: SerializedError): TroupeError {
  const err = new TroupeError(e.code, e.message, { issues: e.issues });
  if (e.stack) err.stack = e.stack;
  return err;
}
