// Destination rules for webhook URLs (`webhooks.url` in the config), checked at run creation so a
// bad URL is refused with a reason (the HTTP layer answers 422) instead of failing later, and again
// by the webhook worker. Names are not resolved here: the sender checks the addresses a name
// resolves to when it connects (address-check.ts), the only check DNS rebinding cannot dodge.
import type { ResolvedWebhookUrlPolicy } from "../config/types.ts";
import { refusedHost } from "./address-check.ts";

export interface WebhookUrlPolicy {
  /** Lower-cased exact hosts or `*.example.com` (subdomains only); empty = any host. */
  readonly allowedDomains: readonly string[];
  readonly requireHttps: boolean;
  /** an explicit list; "scheme": 443 for https and 80 for http (the spec's default); "any": no port rule */
  readonly allowedPorts: readonly number[] | "scheme" | "any";
  /** relative (in-process) URLs and loopback hosts refused */
  readonly disableLoopback: boolean;
  readonly maxUrlLength: number;
  /** hosts that are or resolve to loopback, private, link-local or unspecified addresses allowed */
  readonly allowPrivateAddresses: boolean;
}

/**
 * The policy a server applies: the config's, with what it leaves unset decided by the command.
 * `troupe serve` refuses internal addresses and ports other than the scheme's; `troupe dev`
 * (a developer's loopback server) allows both, so a receiver on `http://127.0.0.1:8080` works.
 */
export function webhookUrlPolicy(config: ResolvedWebhookUrlPolicy, dev: boolean): WebhookUrlPolicy {
  return {
    allowedDomains: config.allowedDomains,
    requireHttps: config.requireHttps,
    allowedPorts: config.allowedPorts ?? (dev ? "any" : "scheme"),
    disableLoopback: config.disableLoopback,
    maxUrlLength: config.maxUrlLength,
    allowPrivateAddresses: config.allowPrivateAddresses ?? dev,
  };
}

/** A relative URL is delivered in-process to the server's own router. */
export function isRelativeWebhookUrl(url: string): boolean {
  return url.startsWith("/") && !url.startsWith("//");
}

/** `*.example.com` matches subdomains at any depth but not `example.com` itself. */
export function hostMatchesDomain(host: string, pattern: string): boolean {
  if (pattern.startsWith("*.")) return host.endsWith(pattern.slice(1)) && host.length > pattern.length - 1;
  return host === pattern;
}

/** Returns null when `url` may be used as a webhook destination, else a human-readable reason. */
export function validateWebhookUrl(url: string, policy: WebhookUrlPolicy): string | null {
  if (url.length === 0) return "Webhook URL must not be empty";
  if (url.length > policy.maxUrlLength) {
    return `Webhook URL is ${url.length} characters long; the limit is ${policy.maxUrlLength}`;
  }
  if (isRelativeWebhookUrl(url)) {
    return policy.disableLoopback ? "Loopback webhooks (relative URLs) are disabled by configuration (webhooks.url.disable_loopback)" : null;
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return "Webhook URL is not a valid absolute URL or a relative path starting with '/'";
  }
  const scheme = parsed.protocol.slice(0, -1);
  if (scheme !== "http" && scheme !== "https") return `Webhook URL scheme must be http or https, not ${scheme}`;
  if (policy.requireHttps && scheme !== "https") return "Webhook URL must use https (webhooks.url.require_https)";
  const host = parsed.hostname.toLowerCase();
  if (!host) return "Webhook URL has no host";
  const refused = refusedHost(host, policy);
  if (refused) return refused;
  if (policy.allowedDomains.length > 0) {
    const bare = host.replace(/\.$/, "");
    if (!policy.allowedDomains.some((d) => hostMatchesDomain(bare, d))) {
      return `Webhook host ${host} is not in webhooks.url.allowed_domains`;
    }
  }
  if (policy.allowedPorts !== "any") {
    const defaultPort = scheme === "https" ? 443 : 80;
    const port = parsed.port === "" ? defaultPort : Number(parsed.port);
    if (policy.allowedPorts === "scheme") {
      if (port !== defaultPort) return `Webhook port ${port} is not allowed: without webhooks.url.allowed_ports, ${scheme} URLs must use port ${defaultPort}`;
    } else if (!policy.allowedPorts.includes(port)) {
      return `Webhook port ${port} is not in webhooks.url.allowed_ports (${policy.allowedPorts.join(", ")})`;
    }
  }
  return null;
}

/**
 * A URL as it may appear in logs: userinfo masked (`http://user:***@host/`), the query string
 * dropped (it often carries the shared secret, `?token=`).
 */
export function urlForLog(url: string): string {
  const q = url.indexOf("?");
  const base = q < 0 ? url : `${url.slice(0, q)}?…`;
  // scheme://userinfo@ — the userinfo ends at the last "@" before the path
  return base.replace(/^([a-z][a-z0-9+.-]*:\/\/)([^/?#]*)@/i, (_m, scheme: string, userinfo: string) => {
    const colon = userinfo.indexOf(":");
    return `${scheme}${colon < 0 ? "***" : `${userinfo.slice(0, colon)}:***`}@`;
  });
}
