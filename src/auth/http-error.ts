// Errors of the user's auth code, with the status the user chose: the SDK's `HTTPException`
// (recognised by shape, so the server needs no SDK import), `false` results and bad results.
import { TroupeError, type ErrorCode } from "../errors.ts";
import type { JsonReply } from "../http/types.ts";

/** Nearest domain code per status, so an AuthHttpError that escapes exactErrors() still maps sanely. */
const CODE_OF: Record<number, ErrorCode> = {
  400: "BAD_REQUEST",
  401: "UNAUTHORIZED",
  403: "FORBIDDEN",
  404: "NOT_FOUND",
  409: "CONFLICT",
  413: "PAYLOAD_TOO_LARGE",
  415: "UNSUPPORTED_MEDIA_TYPE",
  422: "VALIDATION",
  429: "RATE_LIMITED",
  501: "NOT_IMPLEMENTED",
  503: "UNAVAILABLE",
};

const STATUS_TEXT: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  409: "Conflict",
  500: "Internal Server Error",
};

/** An auth decision with an exact HTTP status (carried to the wire by AuthRuntime.exactErrors). */
export class AuthHttpError extends TroupeError {
  readonly status: number;

  constructor(status: number, message?: string, headers?: Record<string, string>) {
    const code = CODE_OF[status] ?? (status >= 500 ? "INTERNAL" : "BAD_REQUEST");
    super(code, message || STATUS_TEXT[status] || `HTTP ${status}`, { headers });
    this.name = "AuthHttpError";
    this.status = status;
  }

  reply(): JsonReply {
    return { kind: "json", status: this.status, body: { detail: this.message }, headers: this.headers === undefined ? undefined : { ...this.headers } };
  }
}

/** The SDK's HTTPException (and look-alikes): an object with a numeric `status` and `headers`. */
export function isHttpException(err: unknown): err is { status: number; message?: unknown; headers?: unknown } {
  if (typeof err !== "object" || err === null || !("status" in err) || !("headers" in err)) return false;
  const status = (err as { status: unknown }).status;
  return typeof status === "number" && Number.isInteger(status) && status >= 100 && status <= 599;
}

/** HTTPException → AuthHttpError (message defaults to "Unauthorized", as upstream); anything else unchanged. */
export function fromThrown(err: unknown): unknown {
  if (!isHttpException(err) || err instanceof AuthHttpError) return err;
  const message = typeof err.message === "string" && err.message !== "" ? err.message : "Unauthorized";
  return new AuthHttpError(err.status, message, headerRecord(err.headers));
}

function headerRecord(h: unknown): Record<string, string> | undefined {
  if (h === null || h === undefined) return undefined;
  const out: Record<string, string> = {};
  if (typeof (h as Headers).forEach === "function" && typeof (h as Headers).get === "function") {
    (h as Headers).forEach((v, k) => (out[k] = v));
  } else if (Array.isArray(h)) {
    for (const pair of h) if (Array.isArray(pair) && pair.length === 2) out[String(pair[0])] = String(pair[1]);
  } else if (typeof h === "object") {
    for (const [k, v] of Object.entries(h)) if (v !== undefined && v !== null) out[k] = String(v);
  }
  return Object.keys(out).length > 0 ? out : undefined;
}
