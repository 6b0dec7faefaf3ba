// Destination rules for webhook URLs (`webhooks.url` in the config), checked once at run
// creation so a bad URL is refused with a reason (the HTTP layer answers 422) instead of failing later.
import type { ResolvedWebhookUrlPolicy } from "../config/types.ts";

export type WebhookUrlPolicy = ResolvedWebhookUrlPolicy;

/** A relative URL is delivered in-process to the server's own router. */
export function isRelativeWebhookUrl(url: string): boolean {
  return url.startsWith("/") && !url.startsWith("//");
}

const LOOPBACK_NAMES: ReadonlySet<string> = new Set(["localhost", "host.docker.internal", "0.0.0.0", "::", "::1"]);

/** Host as given by WHATWG URL (lower-cased, IPv4 numbers normalised, IPv6 bracketed). */
export function isLoopbackHost(hostname: string): boolean {
  const h = hostname.replace(/^\[|\]$/g, "").replace(/\.$/, "");
  if (LOOPBACK_NAMES.has(h) || h.endsWith(".localhost")) return true;
  if (/^127\.\d+\.\d+\.\d+$/.test(h)) return true;
  // IPv4-mapped / -compatible loopback: URL normalises [::ffff:127.0.0.1] to [::ffff:7f00:1]
  return /^::(ffff:)?7f[0-9a-f]{2}:[0-9a-f]{1,4}$/.test(h);
}

/** `*.example.com` matches subdomains at any depth but not `example.com` itself. */
export function hostMatchesDomain(host: string, pattern: string): boolean {
  if (pattern.startsWith("*.")) return host.endsWith(pattern.slice(1)) && host.length > pattern.length - 1;
  return host === pattern;
}

/**
 * Returns null when `url` may be used as a webhook destination, else a human-readable reason.
 *
 * `allowedPorts: null` (the option absent) allows ANY port. Upstream documents an implicit
 * 443/80 allowlist, but that would refuse `http://127.0.0.1:8080/hook` style receivers used in
 * development and tests; operators who want the strict rule set `allowed_ports: [443, 80]`.
 * Host names are not resolved here (the check is synchronous): a public name that resolves to
 * loopback is not caught, and private (RFC 1918) addresses are not refused.
 */
export function validateWebhookUrl(url: string, policy: WebhookUrlPolicy): string | null {
  if (url.length === 0) return "Webhook URL must not be empty";
  if (url.length > policy.maxUrlLength) {
    return `Webhook URL is ${url.length} characters long; the limit is ${policy.maxUrlLength}`;
  }
  if (isRelativeWebhookUrl(url)) {
    return policy.disableLoopback
      ? "Loopback webhooks (relative URLs) are disabled by configuration (webhooks.url.disable_loopback)"
      : null;
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
  if (policy.disableLoopback && isLoopbackHost(host)) {
    return `Loopback webhooks (localhost and loopback addresses such as ${host}) are disabled by configuration (webhooks.url.disable_loopback)`;
  }
  if (policy.allowedDomains.length > 0) {
    const bare = host.replace(/\.$/, "");
    if (!policy.allowedDomains.some((d) => hostMatchesDomain(bare, d))) {
      return `Webhook host ${host} is not in webhooks.url.allowed_domains`;
    }
  }
  if (policy.allowedPorts !== null) {
    const port = parsed.port === "" ? (scheme === "https" ? 443 : 80) : Number(parsed.port);
    if (!policy.allowedPorts.includes(port)) {
      return `Webhook port ${port} is not in webhooks.url.allowed_ports (${policy.allowedPorts.join(", ")})`;
    }
  }
  return null;
}
