// Whether the deployment config asks for webhooks (a `webhooks` section that changes anything):
// then the server starts the webhook worker at startup instead of on the first delivery.
import { DEFAULTS } from "../config/defaults.ts";
import type { ResolvedWebhooksConfig } from "../config/types.ts";

export function webhooksConfigured(w: ResolvedWebhooksConfig): boolean {
  const d = DEFAULTS.webhooks;
  return (
    Object.keys(w.headers).length > 0 ||
    w.envPrefix !== d.envPrefix ||
    w.url.allowedDomains.length > 0 ||
    w.url.requireHttps !== d.requireHttps ||
    w.url.allowedPorts !== null ||
    w.url.disableLoopback !== d.disableLoopback ||
    w.url.maxUrlLength !== d.maxUrlLength
  );
}
