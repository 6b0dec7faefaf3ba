// CORS: headers on every reply and answers to preflight requests, per http.cors in the config.
import type { ResolvedCorsConfig } from "../config/index.ts";
import type { Guard } from "./dispatch.ts";
import type { Headers } from "./types.ts";

export function corsHeaders(c: ResolvedCorsConfig): Headers {
  const h: Headers = {
    "access-control-allow-origin": c.allowOrigins.length === 1 ? c.allowOrigins[0] : c.allowOrigins.includes("*") ? "*" : c.allowOrigins[0] ?? "*",
    "access-control-expose-headers": c.exposeHeaders.join(","),
  };
  if (c.allowCredentials) h["access-control-allow-credentials"] = "true";
  return h;
}

export function corsGuard(c: ResolvedCorsConfig): Guard {
  const regex = c.allowOriginRegex ? new RegExp(c.allowOriginRegex) : null;
  return (req, ctx) => {
    const origin = req.headers.origin;
    if (origin && (c.allowOrigins.includes(origin) || regex?.test(origin))) {
      ctx.responseHeaders["access-control-allow-origin"] = origin;
      ctx.responseHeaders.vary = "Origin";
    }
    if (req.method !== "OPTIONS") return undefined;
    const headers: Headers = {
      "access-control-allow-methods": (c.allowMethods.length ? c.allowMethods : ["GET", "HEAD", "PUT", "POST", "DELETE", "PATCH"]).join(","),
      "access-control-allow-headers": c.allowHeaders.length ? c.allowHeaders.join(",") : req.headers["access-control-request-headers"] ?? "*",
    };
    if (c.maxAgeSeconds !== null) headers["access-control-max-age"] = String(c.maxAgeSeconds);
    return { kind: "empty", status: 204, headers };
  };
}
