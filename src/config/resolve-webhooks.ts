// Resolves the `webhooks` block: header names checked and `${{ env.VAR }}` templates substituted
// now (startup stops on a bad or missing variable), the signing secret checked, destination
// policy with defaults applied.

import { DEFAULTS } from "./defaults.ts";
import { resolveEnvTemplates } from "./templates.ts";
import { signingSecretProblem } from "../webhooks/signing.ts";
import type { ResolveContext } from "./context.ts";
import type { RawConfig, ResolvedWebhooksConfig } from "./types.ts";

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const DOMAIN_PATTERN = /^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/;

function resolveHeaders(headers: Record<string, string>, envPrefix: string, ctx: ResolveContext): Record<string, string> {
  const resolved: Record<string, string> = {};
  for (const [name, template] of Object.entries(headers)) {
    const key = ["webhooks", "headers", name];
    if (!HEADER_NAME.test(name)) {
      ctx.out.error(key, `${JSON.stringify(name)} is not a valid HTTP header name`);
      continue;
    }
    const r = resolveEnvTemplates(template, ctx.env, envPrefix);
    if (!r.ok) {
      for (const p of r.problems) ctx.out.error(key, p);
      continue;
    }
    if (/[\r\n\0]/.test(r.value)) {
      ctx.out.error(key, "value contains a line break or NUL after substitution");
      continue;
    }
    resolved[name] = r.value;
  }
  return resolved;
}

/** `signing_secret` with its templates substituted, checked to be a Standard Webhooks secret. */
function resolveSigningSecret(template: string | undefined, envPrefix: string, ctx: ResolveContext): string | null {
  if (template === undefined) return null;
  const key = ["webhooks", "signing_secret"];
  const r = resolveEnvTemplates(template, ctx.env, envPrefix);
  if (!r.ok) {
    for (const p of r.problems) ctx.out.error(key, p);
    return null;
  }
  const problem = signingSecretProblem(r.value);
  if (problem) {
    ctx.out.error(key, problem);
    return null;
  }
  return r.value;
}

export function resolveWebhooks(raw: RawConfig["webhooks"], ctx: ResolveContext): ResolvedWebhooksConfig {
  const envPrefix = raw?.env_prefix ?? DEFAULTS.webhooks.envPrefix;
  const url = raw?.url ?? {};
  const allowedDomains: string[] = [];
  (url.allowed_domains ?? []).forEach((domain, i) => {
    const d = domain.trim().toLowerCase().replace(/\.$/, "");
    if (DOMAIN_PATTERN.test(d)) allowedDomains.push(d);
    else
      ctx.out.error(
        ["webhooks", "url", "allowed_domains", i],
        `must be a host name or "*.example.com" (no scheme, port or path) — got ${JSON.stringify(domain)}`,
      );
  });
  return {
    envPrefix,
    headers: resolveHeaders(raw?.headers ?? {}, envPrefix, ctx),
    signingSecret: resolveSigningSecret(raw?.signing_secret, envPrefix, ctx),
    url: {
      allowedDomains: [...new Set(allowedDomains)],
      requireHttps: url.require_https ?? DEFAULTS.webhooks.requireHttps,
      allowedPorts: url.allowed_ports ? [...new Set(url.allowed_ports)] : null,
      disableLoopback: url.disable_loopback ?? DEFAULTS.webhooks.disableLoopback,
      maxUrlLength: url.max_url_length ?? DEFAULTS.webhooks.maxUrlLength,
      allowPrivateAddresses: url.allow_private_addresses ?? null,
    },
  };
}
