// The HTTP guard applying the platform rate limits (X-RateLimit-* on every reply, 429 over them).
// It runs before authentication: only a request whose x-api-key verifies counts under its key and
// x-user-id; any other under its client IP, so made-up keys or user ids mint no fresh buckets.
import type { Guard } from "../http/dispatch.ts";
import { errorReply } from "../http/errors.ts";
import type { TrustedProxies } from "./client-ip.ts";
import type { RateLimitDecisions } from "./decisions.ts";
import { RateLimiter, rateLimitError, type RateLimiterOptions } from "./limiter.ts";

export interface RateLimitIdentity {
  /** does this x-api-key verify here? Absent (a server without API keys): identity headers never count */
  verifiesKey?: (key: string) => boolean;
  /** peers whose X-Forwarded-For names the client (client-ip.ts); absent: the peer is the client */
  trustedProxies?: TrustedProxies;
  /** where decisions are counted per rule (/metrics) */
  decisions?: RateLimitDecisions;
}

export function rateLimitGuard(opts: RateLimiterOptions, identity: RateLimitIdentity = {}): Guard {
  const limiter = new RateLimiter(opts);
  const { verifiesKey, trustedProxies, decisions } = identity;
  return (req, ctx) => {
    const key = req.headers["x-api-key"];
    const verified = key !== undefined && verifiesKey !== undefined && verifiesKey(key.trim());
    const ip = trustedProxies ? trustedProxies.clientIp(req.clientIp, req.headers["x-forwarded-for"]) : req.clientIp;
    const result = limiter.check(req.method, req.path, req.headers, ip, Date.now(), verified);
    if (decisions !== undefined && result.ruleId !== undefined) decisions.count(result.ruleId, result.allowed);
    if (result.allowed) {
      if (result.ruleId !== undefined) {
        const h = ctx.responseHeaders;
        h["x-ratelimit-limit"] = String(result.limit);
        h["x-ratelimit-remaining"] = String(result.remaining);
        h["x-ratelimit-reset"] = String(result.resetSeconds);
      }
      return undefined;
    }
    return errorReply(rateLimitError(result));
  };
}
