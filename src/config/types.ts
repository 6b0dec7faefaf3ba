// Types of the deployment config: `RawConfig` is what service.json / langgraph.json may say (all
// optional, snake_case); `ResolvedConfig` is what the server runs on (all fields set, camelCase, units in names).

/** A module export to import: `"./file.ts:name"` resolved against the config file's directory. */
export interface ImportRef {
  /** Absolute path of the module file (checked to exist at load time). */
  readonly filePath: string;
  /** Export to take; `"default"` when the import string had no `:name`. */
  readonly exportName: string;
}

export interface ResolvedGraph extends ImportRef {
  readonly graphId: string;
  readonly description: string | null;
}

export interface ResolvedCorsConfig {
  readonly allowOrigins: readonly string[];
  readonly allowMethods: readonly string[];
  /** Empty = echo the preflight's Access-Control-Request-Headers. */
  readonly allowHeaders: readonly string[];
  readonly allowCredentials: boolean;
  /** Source of a RegExp (already checked to compile); null = none. */
  readonly allowOriginRegex: string | null;
  /** Always contains content-location, x-pagination-total and x-pagination-next. */
  readonly exposeHeaders: readonly string[];
  /** null = send no Access-Control-Max-Age. */
  readonly maxAgeSeconds: number | null;
}

export interface ResolvedHeaderFilter {
  /** Lower-cased header names; `*` wildcards allowed. */
  readonly includes: readonly string[];
  /** Lower-cased header names; `*` wildcards allowed; excludes win over includes. */
  readonly excludes: readonly string[];
}

export interface ResolvedHttpConfig {
  /** Custom app mounted before the built-in routes; null = none. */
  readonly app: ImportRef | null;
  readonly disableAssistants: boolean;
  readonly disableThreads: boolean;
  readonly disableRuns: boolean;
  readonly disableStore: boolean;
  readonly disableMeta: boolean;
  readonly disableMcp: boolean;
  readonly disableA2a: boolean;
  readonly disableUi: boolean;
  readonly disableWebhooks: boolean;
  readonly cors: ResolvedCorsConfig;
  /** Which request headers are copied into a run's `configurable`. */
  readonly configurableHeaders: ResolvedHeaderFilter;
  /** "" or a path like "/api" (leading slash, no trailing slash). */
  readonly mountPrefix: string;
  readonly maxBodyBytes: number;
  /** Platform rate limits of this region; null = off. */
  readonly rateLimit: "us" | "eu" | null;
}

export interface ResolvedAuthConfig {
  /** Module exporting the `Auth` instance; null = no custom auth. */
  readonly path: ImportRef | null;
  readonly disableStudioAuth: boolean;
  /** Troupe: `troupe serve` honours the Studio header too (by default only `troupe dev` does). */
  readonly allowStudioOnServe: boolean;
}

export interface ResolvedWebhookUrlPolicy {
  /** Lower-cased exact hosts or `*.example.com` (subdomains only); empty = any host. */
  readonly allowedDomains: readonly string[];
  readonly requireHttps: boolean;
  /** null = not configured: `troupe serve` allows the scheme's default port only (443 for https, 80 for http), `troupe dev` any port. */
  readonly allowedPorts: readonly number[] | null;
  /** true = relative (in-process) and loopback destinations are refused. */
  readonly disableLoopback: boolean;
  readonly maxUrlLength: number;
  /**
   * Troupe: may hosts that are (or resolve to) loopback, private, link-local or unspecified addresses
   * be called? null = not configured: no on `troupe serve`, yes on `troupe dev`.
   */
  readonly allowPrivateAddresses: boolean | null;
}

export interface ResolvedWebhooksConfig {
  readonly envPrefix: string;
  /** Header name → value with every `${{ env.VAR }}` template already substituted. */
  readonly headers: Readonly<Record<string, string>>;
  /** Standard Webhooks secret deliveries are signed with (templates substituted); null = unsigned */
  readonly signingSecret: string | null;
  readonly url: ResolvedWebhookUrlPolicy;
}

export type ResolvedEmbed = { readonly kind: "provider"; readonly provider: string; readonly model: string } | ({ readonly kind: "module" } & ImportRef);

export interface ResolvedStoreIndex {
  readonly dims: number;
  readonly embed: ResolvedEmbed;
  readonly fields: readonly string[];
}

export interface ResolvedStoreConfig {
  /** null = no semantic index. */
  readonly index: ResolvedStoreIndex | null;
  readonly ttl: {
    readonly refreshOnRead: boolean;
    /** null = items never expire by default. */
    readonly defaultTtlMinutes: number | null;
    /** null = no background sweep. */
    readonly sweepIntervalMinutes: number | null;
  };
}

export interface ResolvedCheckpointerConfig {
  readonly ttl: {
    readonly strategy: "delete" | "keep_latest";
    /** null = threads never expire by default. */
    readonly defaultTtlMinutes: number | null;
    readonly sweepIntervalMinutes: number;
    readonly sweepLimit: number;
  };
}

/** Troupe's `logging` section; LOG_LEVEL / LOG_JSON in the environment win over it (src/log/options.ts). */
export interface ResolvedLoggingConfig {
  /** null: LOG_LEVEL, else info */
  readonly level: "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent" | null;
  /** null: LOG_JSON, else the command's (dev: pretty, serve: json) */
  readonly format: "json" | "pretty" | null;
  readonly requestsPerSecond: number;
}

export interface ResolvedConfig {
  /** Absolute path of the file that was loaded. */
  readonly configPath: string;
  /** Directory all relative paths were resolved against. */
  readonly configDir: string;
  /** In the order the config file lists them. */
  readonly graphs: readonly ResolvedGraph[];
  /** Variables declared by the config (`env` object or dotenv file) only; the caller applies them. */
  readonly env: Readonly<Record<string, string>>;
  readonly nodeVersion: string;
  readonly dependencies: readonly string[];
  readonly http: ResolvedHttpConfig;
  readonly auth: ResolvedAuthConfig;
  readonly webhooks: ResolvedWebhooksConfig;
  readonly store: ResolvedStoreConfig;
  readonly checkpointer: ResolvedCheckpointerConfig;
  readonly logging: ResolvedLoggingConfig;
  /** UI bundle name → absolute path of its entry file. */
  readonly ui: Readonly<Record<string, string>>;
  readonly uiConfig: { readonly shared: readonly string[] };
  /** Non-fatal findings (unknown keys, odd combinations), each naming file and key. */
  readonly warnings: readonly string[];
}

// ---- raw input (shape guaranteed by the JSON schema once validated) ----

export type RawGraphSpec = string | { path: string; description?: string };

export interface RawConfig {
  graphs: Record<string, RawGraphSpec>;
  env?: string | Record<string, string>;
  node_version?: string;
  dependencies?: string[];
  http?: {
    app?: string;
    disable_assistants?: boolean;
    disable_threads?: boolean;
    disable_runs?: boolean;
    disable_store?: boolean;
    disable_meta?: boolean;
    disable_mcp?: boolean;
    disable_a2a?: boolean;
    disable_ui?: boolean;
    disable_webhooks?: boolean;
    cors?: {
      allow_origins?: string[];
      allow_methods?: string[];
      allow_headers?: string[];
      allow_credentials?: boolean;
      allow_origin_regex?: string;
      expose_headers?: string[];
      max_age?: number;
    };
    configurable_headers?: { includes?: string[]; excludes?: string[] };
    mount_prefix?: string;
    max_body_bytes?: number;
    rate_limit?: "us" | "eu" | "off";
  };
  auth?: { path?: string; disable_studio_auth?: boolean; allow_studio_on_serve?: boolean };
  webhooks?: {
    env_prefix?: string;
    headers?: Record<string, string>;
    signing_secret?: string;
    url?: {
      allowed_domains?: string[];
      require_https?: boolean;
      allowed_ports?: number[];
      disable_loopback?: boolean;
      max_url_length?: number;
      allow_private_addresses?: boolean;
    };
  };
  store?: {
    index?: { dims: number; embed: string; fields?: string[] };
    ttl?: { refresh_on_read?: boolean; default_ttl?: number; sweep_interval_minutes?: number };
  };
  checkpointer?: {
    ttl?: {
      strategy?: "delete" | "keep_latest";
      default_ttl?: number;
      sweep_interval_minutes?: number;
      sweep_limit?: number;
    };
  };
  logging?: { level?: ResolvedLoggingConfig["level"]; format?: "json" | "pretty"; requests_per_second?: number };
  ui?: Record<string, string>;
  ui_config?: { shared?: string[] };
}
