// Builds the WHATWG `Request` an `authenticate` callback receives from the HTTP layer's
// RawRequest: method, absolute URL (Host header + path + query), headers and body.
//
// `authenticate` runs as soon as the headers are in, before the body is read (a refused request
// never has its body kept beyond UNADMITTED_BODY_BYTES). The body is still there for a callback
// that reads it: a stream that reads the whole body (admitting the request) when first pulled.
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
  if (NO_BODY.has(req.method)) return new Request(url, { method: req.method, headers, signal: req.signal });
  if (req.body === null && req.bodyArrival) {
    const arrival = req.bodyArrival;
    const body = new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          const refused = await arrival.complete();
          if (refused) return controller.error(new Error("request body refused"));
          if (req.body && req.body.length > 0) controller.enqueue(new Uint8Array(req.body));
          controller.close();
        },
      },
      { highWaterMark: 0 }, // nothing is pulled until the callback reads
    );
    return new Request(url, { method: req.method, headers, body, signal: req.signal, duplex: "half" } as RequestInit);
  }
  const body = req.body && req.body.length > 0 ? new Uint8Array(req.body) : undefined;
  return new Request(url, { method: req.method, headers, body, signal: req.signal });
}
