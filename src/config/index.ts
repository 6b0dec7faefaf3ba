// Public surface of deployment-config loading: loadConfig, its error type, the resolved types and
// the JSON schema (for editors and docs).

export { loadConfig, type LoadConfigOptions } from "./load.ts";
export { ConfigError, type ConfigProblem } from "./errors.ts";
export { CONFIG_SCHEMA } from "./schema.ts";
export { DEFAULTS as CONFIG_DEFAULTS } from "./defaults.ts";
export type {
  ImportRef,
  RawConfig,
  ResolvedAuthConfig,
  ResolvedCheckpointerConfig,
  ResolvedConfig,
  ResolvedCorsConfig,
  ResolvedEmbed,
  ResolvedGraph,
  ResolvedHeaderFilter,
  ResolvedHttpConfig,
  ResolvedStoreConfig,
  ResolvedStoreIndex,
  ResolvedWebhookUrlPolicy,
  ResolvedWebhooksConfig,
} from "./types.ts";
