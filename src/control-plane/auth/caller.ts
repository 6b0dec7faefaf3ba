// The identity a control-plane handler acts for, taken from ctx.auth (set by the auth guard).
// Handlers refuse to run without it, so a route mounted without the guard fails closed.
import { TroupeError } from "../../errors.ts";
import type { RequestContext } from "../../http/types.ts";

export interface Caller {
  userId: string;
  orgId: string;
}

export function callerOf(ctx: Pick<RequestContext, "auth">): Caller {
  const a = ctx.auth;
  if (!a?.org) throw new TroupeError("UNAUTHORIZED", "Missing API key: send it in the X-Api-Key header");
  return { userId: a.identity, orgId: a.org };
}
