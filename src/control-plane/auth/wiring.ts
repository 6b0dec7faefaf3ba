// What the control plane takes from the auth modules, in the shape startControlPlane accepts:
// the key/tenant guard, the org/key and token routes, and the `serve` flags that make every
// deployment server require keys of the deployment's organization (its tenant).
import type { Guard } from "../../http/dispatch.ts";
import type { RouteDef } from "../../http/types.ts";
import type { ControlPlaneStorage } from "../storage.ts";
import { tokenRoutes, type TokenRoutesOptions } from "../tokens/routes.ts";
import { controlPlaneAuthGuard } from "./guard.ts";
import { AuthStore } from "./store.ts";
import { authServiceRoutes } from "./routes.ts";

export interface ControlPlaneAuthWiring {
  guards(storage: ControlPlaneStorage): Guard[];
  /** the rate limiter's check that an x-api-key is a real, unrevoked key */
  verifiesKey(storage: ControlPlaneStorage): (key: string) => boolean;
  extraRoutes(storage: ControlPlaneStorage): RouteDef[];
  /** `troupe serve` flags for a deployment: keys of its tenant, read from this control plane's data */
  deploymentArgs(deployment: { tenant_id: string }): string[];
}

export function controlPlaneAuth(dataDir: string, tokens: TokenRoutesOptions = {}): ControlPlaneAuthWiring {
  return {
    guards: (storage) => [controlPlaneAuthGuard(storage)],
    verifiesKey: (storage) => {
      const store = new AuthStore(storage);
      return (key) => {
        store.refresh();
        return store.verify(key) !== null;
      };
    },
    extraRoutes: (storage) => [...authServiceRoutes(storage), ...tokenRoutes(storage, tokens)],
    deploymentArgs: (d) => ["--control-plane-dir", dataDir, "--org", d.tenant_id],
  };
}
