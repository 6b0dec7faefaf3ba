// Builds the WHATWG `Request` an `authenticate` callback receives from the HTTP layer's
// RawRequest: method, absolute URL (Host header + path + query), headers and body.
import type { RawRequest } from "../http/dispatch.ts";

const NO_BODY = new Set(["GET", "HEAD"]);

export function toWebRequest(req: RawRequest): Request {
  const proto = req.headers["x-forwarded-proto"]?.split(",")[0]?.trim() === "https" ? "https" : "http";
  const host = req.headers.host || "localhost";
  let url: URL;
  try {
    url = new URL(`${proto}://${host}${req.path}${req.query ? `?${req.query}` : ""}`);
  } catch {
    url = new URL(`${proto}://localhost${req.path}${req.query ? `?${req.query}` : ""}`);
  }
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    try {
      headers.append(name, value);
    } catch {
      // a header value fetch refuses (e.g. control characters) is left out, not fatal
    }
  }
  const body = !NO_BODY.has(req.method) && req.body && req.body.length > 0 ? new Uint8Array(req.body) : undefined;
  return new Request(url, { method: req.method, headers, body, signal: req.signal });
}
