// The authentication guard (reference §11.3): runs after CORS and rate limiting on every request
// except `/info`, `/metrics` and `GET /ui/*`; Studio requests act as the Studio user where that is allowed
// (AuthRuntimeOptions.studioHeader: `troupe dev`, or opted in for `troupe serve`).
// Success puts the normalized user into the request's `auth`; failure answers the request.
import type { Guard, RawRequest } from "../http/dispatch.ts";
import { AuthHttpError } from "./http-error.ts";
import type { AuthRuntime } from "./runtime.ts";
import { STUDIO_USER, toAuthInfo } from "./user.ts";

export function isAuthExempt(req: Pick<RawRequest, "method" | "path">): boolean {
  if (req.path === "/info" || req.path === "/metrics") return true; // /metrics follows /info's rules
  return req.method === "GET" && (req.path === "/ui" || req.path.startsWith("/ui/"));
}

export function customAuthGuard(runtime: AuthRuntime): Guard {
  if (!runtime.authenticates) return () => undefined;
  const studio = runtime.opts.studioHeader;
  return async (req, ctx) => {
    if (isAuthExempt(req)) return undefined;
    if (studio && req.headers["x-auth-scheme"] === "langsmith") {
      ctx.auth = toAuthInfo({ ...STUDIO_USER, permissions: [] });
      return undefined;
    }
    try {
      ctx.auth = toAuthInfo(await runtime.authenticate(req));
      return undefined;
    } catch (err) {
      if (err instanceof AuthHttpError) return err.reply();
      throw err;
    }
  };
}
