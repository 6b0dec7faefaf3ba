// Resolves the `http` block: route-group switches, CORS (defaults, env CORS_ALLOW_ORIGINS fallback,
// forced expose headers), configurable-header filter, mount prefix (env MOUNT_PREFIX fallback), body limit,
// rate-limit region.

import { DEFAULTS } from "./defaults.ts";
import { optionalImportRef } from "./resolve-graphs.ts";
import type { ResolveContext } from "./context.ts";
import type { RawConfig, ResolvedCorsConfig, ResolvedHttpConfig } from "./types.ts";

type RawHttp = NonNullable<RawConfig["http"]>;

const unique = (xs: readonly string[]): string[] => [...new Set(xs)];
const lower = (xs: readonly string[]): string[] => unique(xs.map((x) => x.trim().toLowerCase()));

function envList(value: string | undefined): string[] | undefined {
  if (value === undefined) return undefined;
  const items = value
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  return items.length > 0 ? items : undefined;
}

function resolveCors(cors: RawHttp["cors"], ctx: ResolveContext): ResolvedCorsConfig {
  const regex = cors?.allow_origin_regex ?? null;
  // a block that gives only a regex allows only what the regex matches, not the default "*"
  const defaultOrigins = regex !== null && cors?.allow_origins === undefined ? [] : [...DEFAULTS.cors.allowOrigins];
  const allowOrigins = unique(cors?.allow_origins ?? envList(ctx.env.CORS_ALLOW_ORIGINS) ?? defaultOrigins);
  const allowCredentials = cors?.allow_credentials ?? DEFAULTS.cors.allowCredentials;
  if (regex !== null) {
    try {
      new RegExp(regex);
    } catch (err) {
      ctx.out.error(["http", "cors", "allow_origin_regex"], `not a valid regular expression: ${(err as Error).message}`);
    }
  }
  if (allowCredentials && allowOrigins.includes("*")) {
    ctx.out.warn(["http", "cors", "allow_credentials"], 'browsers refuse credentials with origin "*"; list the allowed origins explicitly');
  }
  return {
    allowOrigins,
    allowMethods: unique((cors?.allow_methods ?? DEFAULTS.cors.allowMethods).map((m) => m.trim().toUpperCase())),
    allowHeaders: lower(cors?.allow_headers ?? DEFAULTS.cors.allowHeaders),
    allowCredentials,
    allowOriginRegex: regex,
    exposeHeaders: lower([...(cors?.expose_headers ?? []), ...DEFAULTS.cors.exposeHeaders]),
    maxAgeSeconds: cors?.max_age ?? null,
  };
}

/** "" or "/x/y": leading slash, no trailing slash, nothing that is not a path. */
function resolveMountPrefix(http: RawHttp, ctx: ResolveContext): string {
  const fromConfig = http.mount_prefix;
  const raw = (fromConfig ?? ctx.env.MOUNT_PREFIX ?? "").trim();
  const prefix = raw.replace(/\/+$/, "");
  if (prefix === "") return "";
  if (!/^\/[A-Za-z0-9\-._~!$&'()*+,;=:@%/]*$/.test(prefix) || prefix.includes("//")) {
    const where = fromConfig !== undefined ? "" : " (from env MOUNT_PREFIX)";
    ctx.out.error(["http", "mount_prefix"], `must be a path starting with "/", like "/api" — got ${JSON.stringify(raw)}${where}`);
    return "";
  }
  return prefix;
}

function resolveRateLimit(region: "us" | "eu" | "off"): "us" | "eu" | null {
  return region === "off" ? null : region;
}

export function resolveHttp(raw: RawConfig["http"], ctx: ResolveContext): ResolvedHttpConfig {
  const http: RawHttp = raw ?? {};
  return {
    app: optionalImportRef(http.app, ["http", "app"], ctx),
    disableAssistants: http.disable_assistants ?? false,
    disableThreads: http.disable_threads ?? false,
    disableRuns: http.disable_runs ?? false,
    disableStore: http.disable_store ?? false,
    disableMeta: http.disable_meta ?? false,
    disableMcp: http.disable_mcp ?? false,
    disableA2a: http.disable_a2a ?? false,
    disableUi: http.disable_ui ?? false,
    disableWebhooks: http.disable_webhooks ?? false,
    cors: resolveCors(http.cors, ctx),
    configurableHeaders: {
      includes: lower(http.configurable_headers?.includes ?? DEFAULTS.configurableHeaders.includes),
      excludes: lower(http.configurable_headers?.excludes ?? DEFAULTS.configurableHeaders.excludes),
    },
    mountPrefix: resolveMountPrefix(http, ctx),
    maxBodyBytes: http.max_body_bytes ?? DEFAULTS.maxBodyBytes,
    rateLimit: resolveRateLimit(http.rate_limit ?? DEFAULTS.rateLimit),
  };
}
