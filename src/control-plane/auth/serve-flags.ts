// How `troupe serve` turns on API key enforcement: --org ORG (or $TROUPE_ORG_ID) names the
// deployment's organization and --control-plane-dir DIR (or $TROUPE_CONTROL_PLANE_DIR) the
// control plane data holding the keys. `troupe dev` never authenticates (it is loopback-only).
import { resolve } from "node:path";
import type { ApiKeyAuthOptions } from "../../http/api-key-guard.ts";

export const SERVE_AUTH_USAGE = `  --org ORG         require X-Api-Key of this organization (id or name; env TROUPE_ORG_ID). Health checks stay open.
  --control-plane-dir DIR  control plane data with the keys (env TROUPE_CONTROL_PLANE_DIR); needed with --org
`;

export function apiKeyAuthFromFlags(
  command: string,
  flags: { "control-plane-dir"?: string; org?: string },
  env: NodeJS.ProcessEnv = process.env,
): ApiKeyAuthOptions | null {
  if (command === "dev") {
    if (flags.org !== undefined || flags["control-plane-dir"] !== undefined)
      throw new Error("troupe dev runs without API keys (loopback only); use troupe serve --org ORG --control-plane-dir DIR");
    return null;
  }
  const org = flags.org ?? env.TROUPE_ORG_ID;
  if (!org) {
    if (flags["control-plane-dir"] !== undefined) throw new Error("--control-plane-dir needs --org ORG (the deployment's organization)");
    return null;
  }
  const dir = flags["control-plane-dir"] ?? env.TROUPE_CONTROL_PLANE_DIR;
  if (!dir) throw new Error("--org needs --control-plane-dir DIR (or TROUPE_CONTROL_PLANE_DIR): where the control plane keeps the API keys");
  return { controlPlaneDir: resolve(dir), orgId: org };
}
