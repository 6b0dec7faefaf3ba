// The deployment server's API key check: every request carries X-Api-Key with a valid key of
// the deployment's organization (401 without or with an unknown/revoked key, 403 for another
// org's key). Keys are read from the control plane's LMDB files on this machine; a valid key is
// trusted for at most cacheTtlMs (default 2 s), the window in which a revocation takes effect —
// also on streams (SSE, WebSocket) the key opened, which are re-checked as often (key-streams.ts).
import { existsSync } from "node:fs";
import { join } from "node:path";
import { TroupeError } from "../errors.ts";
import { AuthStore } from "../control-plane/auth/store.ts";
import { KeyVerifier, presentedKey } from "../control-plane/auth/verifier.ts";
import { openControlPlaneStorage } from "../control-plane/storage.ts";
import type { Guard, RawRequest } from "./dispatch.ts";
import { errorReply } from "./errors.ts";
import { KeyedStreams } from "./key-streams.ts";

export interface ApiKeyAuthOptions {
  /** the control plane's data directory (holds control-plane.mdb) */
  controlPlaneDir: string;
  /** the deployment's organization: id or name */
  orgId: string;
  /** how long a valid key is trusted without re-reading LMDB (default 2000) */
  cacheTtlMs?: number;
}

export interface ApiKeyGuardHandle {
  guard: Guard;
  /** the resolved organization id */
  orgId: string;
  /** does this key verify for this deployment now (cached for up to cacheTtlMs)? The rate limiter's identity check */
  verifies(key: string): boolean;
  close(): Promise<void>;
}

export const DEFAULT_KEY_CACHE_TTL_MS = 2_000;

/** Health checks stay open so load balancers and the supervisor can probe without a key; /metrics as /info. */
export function isApiKeyExempt(req: Pick<RawRequest, "method" | "path">): boolean {
  return (req.method === "GET" || req.method === "HEAD") && (req.path === "/ok" || req.path === "/info" || req.path === "/metrics");
}

const MISSING = "Missing or invalid API key";
const WWW_AUTHENTICATE = { "www-authenticate": 'ApiKey header="X-Api-Key"' };

/** Opens the control plane env and resolves the org; throws (refusing startup) when either is missing. */
export function openApiKeyGuard(opts: ApiKeyAuthOptions): ApiKeyGuardHandle {
  if (!existsSync(join(opts.controlPlaneDir, "control-plane.mdb"))) {
    throw new Error(`--control-plane-dir ${opts.controlPlaneDir}: no control plane data there (control-plane.mdb is missing)`);
  }
  const storage = openControlPlaneStorage(opts.controlPlaneDir);
  const store = new AuthStore(storage);
  const org = store.findOrg(opts.orgId);
  if (!org) {
    void storage.close();
    throw new Error(`--org ${opts.orgId}: no such organization in the control plane at ${opts.controlPlaneDir}`);
  }
  const cacheTtlMs = opts.cacheTtlMs ?? DEFAULT_KEY_CACHE_TTL_MS;
  const verifier = new KeyVerifier(store, { cacheTtlMs });
  const streams = new KeyedStreams((key) => verifier.verifyFresh(key)?.org_id === org.id, Math.max(cacheTtlMs, 100));
  const unauthorized = () => errorReply(new TroupeError("UNAUTHORIZED", MISSING, { headers: WWW_AUTHENTICATE }));
  const guard: Guard = async (req, ctx) => {
    if (isApiKeyExempt(req)) return undefined;
    const key = presentedKey(req.headers, false);
    if (!key) return unauthorized();
    const id = verifier.verify(key);
    if (!id) return unauthorized();
    if (id.org_id !== org.id) return errorReply(new TroupeError("FORBIDDEN", "This API key belongs to another organization than this deployment's"));
    // the rest of the pipeline answers; a stream it opens stays tied to this key
    return streams.watch(key, await ctx.proceed());
  };
  return {
    guard,
    orgId: org.id,
    verifies: (key) => verifier.verify(key)?.org_id === org.id,
    close: () => {
      streams.close();
      return storage.close();
    },
  };
}
