// CORS: headers on every reply and answers to preflight requests, per http.cors in the config.
import type { ResolvedCorsConfig } from "../config/index.ts";
import type { Guard } from "./dispatch.ts";
import type { Headers } from "./types.ts";

/**
 * Headers on every reply. The static allow-origin is `*` when any origin is allowed, or the one
 * listed origin; otherwise none: the guard names a matching request origin itself, and an origin
 * that matches nothing gets no allow-origin at all.
 */
export function corsHeaders(c: ResolvedCorsConfig): Headers {
  const h: Headers = { "access-control-expose-headers": c.exposeHeaders.join(",") };
  const staticOrigin = c.allowOrigins.includes("*") ? "*" : c.allowOrigins.length === 1 ? c.allowOrigins[0] : undefined;
  if (staticOrigin !== undefined) h["access-control-allow-origin"] = staticOrigin;
  if (c.allowCredentials) h["access-control-allow-credentials"] = "true";
  return h;
}

export function corsGuard(c: ResolvedCorsConfig): Guard {
  // The whole origin must match (as Starlette's fullmatch): a bare search would let
  // `https://app.example.com.attacker.test` through a pattern written for `https://app.example.com`.
  const regex = c.allowOriginRegex ? new RegExp(`^(?:${c.allowOriginRegex})$`) : null;
  return (req, ctx) => {
    const origin = req.headers.origin;
    if (origin && (c.allowOrigins.includes(origin) || regex?.test(origin))) {
      ctx.responseHeaders["access-control-allow-origin"] = origin;
      ctx.responseHeaders.vary = "Origin";
    }
    if (req.method !== "OPTIONS") return undefined;
    const headers: Headers = {
      "access-control-allow-methods": (c.allowMethods.length ? c.allowMethods : ["GET", "HEAD", "PUT", "POST", "DELETE", "PATCH"]).join(","),
      "access-control-allow-headers": c.allowHeaders.length ? c.allowHeaders.join(",") : (req.headers["access-control-request-headers"] ?? "*"),
    };
    if (c.maxAgeSeconds !== null) headers["access-control-max-age"] = String(c.maxAgeSeconds);
    return { kind: "empty", status: 204, headers };
  };
}
