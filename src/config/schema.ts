// JSON Schema (draft-07, compiled once by ajv) of service.json / langgraph.json. It checks shape and
// types only; path syntax, file existence and env templates are checked by the resolver with better messages.
// Objects use `additionalProperties: false` so unknown keys are reported — as warnings, never errors.

import { DEFAULTS } from "./defaults.ts";

const str = { type: "string" } as const;
const nonEmpty = { type: "string", minLength: 1 } as const;
const bool = (d: boolean) => ({ type: "boolean", default: d }) as const;
const strList = (d?: readonly string[]) => ({ type: "array", items: nonEmpty, ...(d ? { default: d } : {}) }) as const;
const posInt = { type: "integer", minimum: 1 } as const;
const nonNegNumber = { type: "number", minimum: 0 } as const;

/** `"./file.ts:export"` (export optional → `default`) or `{ path, description? }`. */
const graphSpec = {
  type: ["string", "object"],
  minLength: 1,
  required: ["path"],
  properties: { path: nonEmpty, description: str },
  additionalProperties: false,
} as const;

const cors = {
  type: "object",
  properties: {
    allow_origins: strList(DEFAULTS.cors.allowOrigins),
    allow_methods: strList(DEFAULTS.cors.allowMethods),
    allow_headers: strList(DEFAULTS.cors.allowHeaders),
    allow_credentials: bool(DEFAULTS.cors.allowCredentials),
    allow_origin_regex: nonEmpty,
    expose_headers: strList(DEFAULTS.cors.exposeHeaders),
    max_age: { type: "integer", minimum: 0 },
  },
  additionalProperties: false,
} as const;

const http = {
  type: "object",
  properties: {
    app: nonEmpty,
    disable_assistants: bool(false),
    disable_threads: bool(false),
    disable_runs: bool(false),
    disable_store: bool(false),
    disable_meta: bool(false),
    disable_mcp: bool(false),
    disable_a2a: bool(false),
    disable_ui: bool(false),
    disable_webhooks: bool(false),
    cors,
    configurable_headers: {
      type: "object",
      properties: {
        includes: strList(DEFAULTS.configurableHeaders.includes),
        excludes: strList(DEFAULTS.configurableHeaders.excludes),
      },
      additionalProperties: false,
    },
    mount_prefix: str,
    /** Troupe addition: request bodies above this answer 413. */
    max_body_bytes: { ...posInt, default: DEFAULTS.maxBodyBytes },
    /** Troupe addition: the platform rate limits of a region (docs/RATE_LIMITS.md); `troupe serve --rate-limit` wins. */
    rate_limit: { enum: ["us", "eu", "off"], default: DEFAULTS.rateLimit },
  },
  additionalProperties: false,
} as const;

const webhooks = {
  type: "object",
  properties: {
    env_prefix: { ...nonEmpty, default: DEFAULTS.webhooks.envPrefix },
    headers: { type: "object", additionalProperties: str },
    /** Troupe addition: Standard Webhooks secret (`whsec_` + base64); `${{ env.VAR }}` templates allowed */
    signing_secret: nonEmpty,
    url: {
      type: "object",
      properties: {
        allowed_domains: strList(),
        require_https: bool(DEFAULTS.webhooks.requireHttps),
        allowed_ports: { type: "array", minItems: 1, items: { type: "integer", minimum: 1, maximum: 65535 } },
        disable_loopback: bool(DEFAULTS.webhooks.disableLoopback),
        max_url_length: { ...posInt, default: DEFAULTS.webhooks.maxUrlLength },
        /** Troupe addition (SSRF rule); absent = no on `troupe serve`, yes on `troupe dev`. */
        allow_private_addresses: { type: "boolean" },
      },
      additionalProperties: false,
    },
  },
  additionalProperties: false,
} as const;

const store = {
  type: "object",
  properties: {
    index: {
      type: "object",
      required: ["dims", "embed"],
      properties: { dims: posInt, embed: nonEmpty, fields: strList(DEFAULTS.store.indexFields) },
      additionalProperties: false,
    },
    ttl: {
      type: "object",
      properties: {
        refresh_on_read: bool(DEFAULTS.store.refreshOnRead),
        default_ttl: nonNegNumber,
        sweep_interval_minutes: { type: "number", exclusiveMinimum: 0 },
      },
      additionalProperties: false,
    },
  },
  additionalProperties: false,
} as const;

const checkpointer = {
  type: "object",
  properties: {
    ttl: {
      type: "object",
      properties: {
        strategy: { enum: ["delete", "keep_latest"], default: DEFAULTS.checkpointer.strategy },
        default_ttl: nonNegNumber,
        sweep_interval_minutes: { type: "number", exclusiveMinimum: 0, default: DEFAULTS.checkpointer.sweepIntervalMinutes },
        sweep_limit: { ...posInt, default: DEFAULTS.checkpointer.sweepLimit },
      },
      additionalProperties: false,
    },
  },
  additionalProperties: false,
} as const;

const logging = {
  type: "object",
  properties: {
    level: { enum: ["fatal", "error", "warn", "info", "debug", "trace", "silent"] },
    format: { enum: ["json", "pretty"] },
    requests_per_second: { type: "integer", minimum: 0, default: DEFAULTS.logging.requestsPerSecond },
  },
  additionalProperties: false,
} as const;

export const CONFIG_SCHEMA = {
  $schema: "http://json-schema.org/draft-07/schema#",
  title: "Troupe deployment config (service.json / langgraph.json)",
  type: "object",
  required: ["graphs"],
  properties: {
    $schema: str,
    graphs: { type: "object", minProperties: 1, additionalProperties: graphSpec },
    env: { type: ["string", "object"], minLength: 1, additionalProperties: str },
    node_version: { type: "string", pattern: "^[0-9]+(\\.[0-9]+)*$", default: DEFAULTS.nodeVersion },
    dependencies: strList([]),
    http,
    auth: {
      type: "object",
      properties: { path: nonEmpty, disable_studio_auth: bool(false), allow_studio_on_serve: bool(false) },
      additionalProperties: false,
    },
    webhooks,
    store,
    checkpointer,
    logging,
    ui: { type: "object", additionalProperties: nonEmpty },
    ui_config: {
      type: "object",
      properties: { shared: strList([]) },
      additionalProperties: false,
    },
  },
  // Unknown top-level keys are allowed; the validator turns this keyword's reports into warnings.
  additionalProperties: false,
} as const;
