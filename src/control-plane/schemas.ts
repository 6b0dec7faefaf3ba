// JSON Schemas of the deployments API (platform.md §1.3–1.4): ajv validates request bodies and
// queries with them and the control plane's OpenAPI document quotes them.
import type { JsonSchema } from "../http/schema-types.ts";
import { arrayOf, body, integer, nullable, object, str, text, uuid, withDefault } from "../http/schemas/common.ts";
import { DEPLOYMENT_STATUSES, REVISION_STATUSES } from "./deployments/types.ts";

const dateTime = text({ format: "date-time" });

/** Text that becomes an environment variable or a path: no NUL byte (the OS refuses it at start, long after the request). */
const osText = text({ pattern: "^[^\\u0000]*$" });
// (a secret's name is checked as an environment variable name in deployments/validate.ts)
const secret = body({ name: str, value: osText }, ["name", "value"]);
const secretReference = body({ name: str, secret_name: str, secret_key: str }, ["name", "secret_name", "secret_key"]);
const sourceRevisionConfigRequest = body(
  {
    langgraph_config_path: nullable(osText),
    repo_ref: nullable(str),
    image_uri: nullable(str),
    source_tarball_path: nullable(str),
  },
  [],
  { description: "For internal_source: `langgraph_config_path` names the service.json / langgraph.json of a local project directory (or the directory)" },
);

export const deploymentCreateBody = body(
  {
    name: text({ minLength: 1, maxLength: 63 }),
    source: text({ description: 'only "internal_source" is supported' }),
    source_config: nullable(object),
    source_revision_config: nullable(sourceRevisionConfigRequest),
    secrets: nullable(arrayOf(secret)),
    secret_references: nullable(arrayOf(secretReference)),
  },
  ["name", "source", "source_revision_config"],
);

export const deploymentPatchBody = body({
  name: str,
  revision_source: nullable(str),
  source_config: nullable(object),
  source_revision_config: nullable(sourceRevisionConfigRequest),
  secrets: nullable(arrayOf(secret)),
  secret_references: nullable(arrayOf(secretReference)),
  display_name: nullable(text({ maxLength: 200 })),
});

const paging = {
  limit: withDefault(integer({ minimum: 1, maximum: 100 }), 20),
  offset: withDefault(integer({ minimum: 0 }), 0),
};

export const deploymentListQuery = body({
  ...paging,
  name_contains: str,
  status: text({ description: `comma-separated deployment statuses (${DEPLOYMENT_STATUSES.join(", ")})` }),
  deployment_ids: text({ description: "comma-separated deployment ids" }),
});

export const revisionListQuery = body({
  ...paging,
  status: text({ description: `comma-separated revision statuses (${REVISION_STATUSES.join(", ")})` }),
});

export const deploymentSchema: JsonSchema = {
  type: "object",
  required: [
    "id",
    "name",
    "source",
    "source_config",
    "source_revision_config",
    "secrets",
    "tenant_id",
    "created_at",
    "updated_at",
    "status",
    "latest_revision_id",
    "active_revision_id",
    "url",
  ],
  properties: {
    id: uuid,
    name: str,
    source: { type: "string", enum: ["internal_source"] },
    source_config: nullable({ type: "object" }),
    source_revision_config: { type: "object", properties: { langgraph_config_path: str } },
    secrets: { type: "array", items: { ...secret, description: "values are masked" } },
    secret_references: nullable({ type: "array", items: secretReference }),
    tenant_id: str,
    created_at: dateTime,
    updated_at: dateTime,
    status: { type: "string", enum: DEPLOYMENT_STATUSES },
    latest_revision_id: nullable(uuid),
    active_revision_id: nullable(uuid),
    image_version: nullable(str),
    display_name: nullable(str),
    url: { type: "string", description: "base URL of the deployment server (Troupe addition)" },
  },
};

export const revisionSchema: JsonSchema = {
  type: "object",
  required: ["id", "created_at", "updated_at", "status", "source", "source_revision_config"],
  properties: {
    id: uuid,
    created_at: dateTime,
    updated_at: dateTime,
    status: { type: "string", enum: REVISION_STATUSES },
    source: { type: "string", enum: ["internal_source"] },
    source_revision_config: { type: "object", properties: { langgraph_config_path: str } },
    status_message: { ...nullable(str), description: "why the revision failed or was skipped (Troupe addition)" },
    restart_count: { type: "integer", description: "crash restarts of this revision's server (Troupe addition)" },
  },
};

export const listOf = (item: JsonSchema): JsonSchema => ({
  type: "object",
  required: ["resources", "offset"],
  properties: { resources: { type: "array", items: item }, offset: { type: "integer", description: "offset of the next page" } },
});
