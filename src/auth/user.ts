// The normalized user (reference §11.1): what `authenticate` returned, with identity,
// permissions, is_authenticated and display_name always set; and the Studio stand-in user.
import type { AuthInfo } from "../http/types.ts";
import { AuthHttpError } from "./http-error.ts";
import type { AuthUser } from "./types.ts";

/** Acts for requests carrying `x-auth-scheme: langsmith` where the Studio header is honoured (AuthRuntimeOptions.studioHeader). */
export const STUDIO_USER: Readonly<AuthUser> = Object.freeze({
  kind: "StudioUser",
  identity: "langgraph-studio-user",
  display_name: "langgraph-studio-user",
  permissions: [],
  is_authenticated: true,
});

/** A string is the identity; an object needs a string `identity`. Anything else is the user code's bug → 500. */
export function normalizeUser(returned: unknown): AuthUser {
  if (typeof returned === "string") {
    return { identity: returned, permissions: [], is_authenticated: true, display_name: returned };
  }
  if (typeof returned === "object" && returned !== null && typeof (returned as { identity?: unknown }).identity === "string") {
    const r = returned as Record<string, unknown> & { identity: string };
    const permissions = Array.isArray(r.permissions) ? r.permissions.filter((p): p is string => typeof p === "string") : [];
    return {
      ...r,
      identity: r.identity,
      permissions,
      is_authenticated: typeof r.is_authenticated === "boolean" ? r.is_authenticated : true,
      display_name: typeof r.display_name === "string" ? r.display_name : r.identity,
    };
  }
  throw new AuthHttpError(500, "Invalid auth response received. Make sure to either return a `string` or an object with `identity` property.");
}

export const toAuthInfo = (user: AuthUser): AuthInfo => ({ identity: user.identity, permissions: [...user.permissions], user });

/** The user handlers see: the normalized one when custom auth set it, else one built from the identity. */
export function userOf(info: AuthInfo): AuthUser {
  const u = info.user;
  if (u && typeof u.identity === "string") return u as AuthUser;
  return { identity: info.identity, permissions: [...info.permissions], is_authenticated: true, display_name: info.identity };
}
