// The one place where domain error codes become HTTP statuses and bodies.
// Bodies follow the service spec: {"detail": "<message>"}, or 422 HTTPValidationError.
import { TroupeError, type ErrorCode } from "../errors.ts";
import type { JsonReply } from "./types.ts";

export const STATUS_OF: Record<ErrorCode, number> = {
  NOT_FOUND: 404,
  CONFLICT: 409,
  THREAD_BUSY: 409,
  MULTITASK_REJECTED: 409,
  VALIDATION: 422,
  BAD_REQUEST: 400,
  MALFORMED_JSON: 400,
  PAYLOAD_TOO_LARGE: 413,
  URI_TOO_LONG: 414,
  UNSUPPORTED_MEDIA_TYPE: 415,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  RATE_LIMITED: 429,
  GRAPH_NOT_FOUND: 404,
  GRAPH_LOAD_FAILED: 500,
  METHOD_NOT_ALLOWED: 405,
  UPGRADE_REQUIRED: 426,
  NOT_IMPLEMENTED: 501,
  UNAVAILABLE: 503,
  ASSISTANT_CHANGED: 503,
  INTERNAL: 500,
};

export function errorReply(err: unknown): JsonReply {
  if (err instanceof TroupeError) {
    const status = STATUS_OF[err.code];
    const body = err.code === "VALIDATION" && err.issues ? { detail: err.issues } : { detail: err.message };
    // a copy: the dispatcher adds each request's rate-limit and CORS headers to the reply's own
    // headers, and an error's headers may be a shared constant (WWW-Authenticate)
    return { kind: "json", status, body, headers: err.headers === undefined ? undefined : { ...err.headers } };
  }
  return { kind: "json", status: 500, body: { detail: "Internal Server Error" } };
}

/** A plain (non-upgrade) request to a WebSocket route. */
export const upgradeRequired = (detail = "This endpoint needs a WebSocket upgrade request") =>
  new TroupeError("UPGRADE_REQUIRED", detail, { headers: { upgrade: "websocket" } });

/** What a plain request to a WebSocket route gets. */
export const upgradeRequiredReply = (): JsonReply => errorReply(upgradeRequired());

export const STATUS_TEXT: Record<number, string> = {
  200: "200 OK",
  201: "201 Created",
  202: "202 Accepted",
  204: "204 No Content",
  207: "207 Multi-Status",
  400: "400 Bad Request",
  401: "401 Unauthorized",
  403: "403 Forbidden",
  404: "404 Not Found",
  405: "405 Method Not Allowed",
  409: "409 Conflict",
  413: "413 Payload Too Large",
  414: "414 URI Too Long",
  415: "415 Unsupported Media Type",
  422: "422 Unprocessable Entity",
  426: "426 Upgrade Required",
  429: "429 Too Many Requests",
  500: "500 Internal Server Error",
  501: "501 Not Implemented",
  503: "503 Service Unavailable",
};

export const statusLine = (status: number): string => STATUS_TEXT[status] ?? `${status} Status`;
