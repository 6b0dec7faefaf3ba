// The control plane's authentication guard: every request except the public documents and the
// health check needs a valid API key (X-Api-Key, or Authorization: Bearer); X-Tenant-Id, when
// sent, must name the key's organization (id or name). Sets ctx.auth for the route handlers.
import { TroupeError } from "../../errors.ts";
import type { Guard, RawRequest } from "../../http/dispatch.ts";
import { errorReply } from "../../http/errors.ts";
import type { ControlPlaneStorage } from "../storage.ts";
import { AuthStore } from "./store.ts";
import { KeyVerifier, presentedKey } from "./verifier.ts";

const PUBLIC_PATHS = new Set(["/ok", "/openapi.json", "/docs"]);

export function isControlPlanePublic(req: Pick<RawRequest, "method" | "path">): boolean {
  return (req.method === "GET" || req.method === "HEAD") && PUBLIC_PATHS.has(req.path);
}

const WWW_AUTHENTICATE = { "www-authenticate": 'ApiKey header="X-Api-Key"' };

export function controlPlaneAuthGuard(storage: ControlPlaneStorage): Guard {
  const store = new AuthStore(storage);
  // No cache on the control plane: revocation (API or CLI) takes effect on the next request.
  const verifier = new KeyVerifier(store, { cacheTtlMs: 0 });
  return (req, ctx) => {
    if (isControlPlanePublic(req)) return undefined;
    const key = presentedKey(req.headers, true);
    if (!key) return errorReply(new TroupeError("UNAUTHORIZED", "Missing API key: send it in the X-Api-Key header", { headers: WWW_AUTHENTICATE }));
    const id = verifier.verify(key);
    if (!id) return errorReply(new TroupeError("UNAUTHORIZED", "Invalid or revoked API key", { headers: WWW_AUTHENTICATE }));
    const tenant = req.headers["x-tenant-id"]?.trim();
    if (tenant && tenant !== id.org_id && store.getOrg(id.org_id)?.name !== tenant) {
      return errorReply(new TroupeError("FORBIDDEN", `X-Tenant-Id "${tenant}" is not the organization of this API key`));
    }
    ctx.auth = { identity: id.user_id, org: id.org_id, permissions: [], user: { user_id: id.user_id, org_id: id.org_id, key_prefix: id.prefix } };
    return undefined;
  };
}
