// The HTTP guard applying the platform rate limits: every reply carries the remaining budget
// (X-RateLimit-*); a denied request gets 429 with Retry-After and a JSON detail.
import type { Guard } from "../http/dispatch.ts";
import { errorReply } from "../http/errors.ts";
import { RateLimiter, rateLimitError, type RateLimiterOptions } from "./limiter.ts";

export function rateLimitGuard(opts: RateLimiterOptions): Guard {
  const limiter = new RateLimiter(opts);
  return (req, ctx) => {
    const result = limiter.check(req.method, req.path, req.headers, req.clientIp);
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
