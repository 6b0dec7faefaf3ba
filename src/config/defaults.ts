// Every default of the deployment config in one place; the JSON schema quotes these values in its
// `default` keywords and the resolver applies them, so the two cannot drift apart.

export const DEFAULTS = {
  nodeVersion: "20",
  maxBodyBytes: 10 * 1024 * 1024,
  /** A standalone server limits no one: the spec's table is the hosted platform's (docs/RATE_LIMITS.md). */
  rateLimit: "off" as const,
  cors: {
    allowOrigins: ["*"],
    allowMethods: ["GET", "HEAD", "PUT", "POST", "DELETE", "PATCH"],
    allowHeaders: [] as string[],
    allowCredentials: false,
    /** Force-added to any configured list: the SDK reads them from browsers. */
    exposeHeaders: ["content-location", "x-pagination-total", "x-pagination-next", "x-request-id"],
  },
  configurableHeaders: {
    includes: ["x-*", "user-agent"],
    excludes: ["x-api-key", "x-tenant-id", "x-service-key"],
    /**
     * Credentials: never copied into a run's configurable (which checkpoints and webhook payloads
     * repeat) unless `includes` names the header exactly, whatever `excludes` says.
     */
    secrets: ["authorization", "proxy-authorization", "cookie", "*token*", "*secret*", "*password*", "*api-key*", "*apikey*", "*credential*"],
  },
  webhooks: {
    envPrefix: "LG_WEBHOOK_",
    requireHttps: false,
    /** Spec: "when true, relative URLs are disallowed" — opt-in, so the in-process route test works. */
    disableLoopback: false,
    maxUrlLength: 2048,
  },
  store: {
    indexFields: ["$"],
    refreshOnRead: true,
  },
  checkpointer: {
    strategy: "delete" as const,
    sweepIntervalMinutes: 5,
    sweepLimit: 1000,
  },
  logging: {
    /** request lines logged one by one per second before the rest are summarized */
    requestsPerSecond: 100,
  },
} as const;

/** Top-level keys only the Docker build / CLI uses: accepted without a warning, otherwise ignored. */
export const SILENT_TOP_LEVEL_KEYS: ReadonlySet<string> = new Set([
  "$schema",
  "dockerfile_lines",
  "docker_compose_file",
  "api_version",
  "_INTERNAL_docker_tag",
  "node_loader",
  "python_version",
  "pip_config_file",
  "pip_installer",
  "base_image",
  "image_distro",
  "keep_pkg_tools",
]);
