// Control-plane routes for organizations and API keys. A key is shown once, in the reply that
// creates it. Keys can be minted for the caller's own org, or for an org the caller's org created
// through POST /v2/orgs; anything else answers 404 (no existence leak). Keys for another existing
// user are refused (403): only new users, or the caller itself, can get keys through the API.
import { notFound } from "../../errors.ts";
import { body, nullable, str, text } from "../../http/schemas/common.ts";
import type { JsonSchema } from "../../http/schema-types.ts";
import { empty, json, route, type RouteDef } from "../../http/types.ts";
import type { ControlPlaneStorage } from "../storage.ts";
import { callerOf } from "./caller.ts";
import { AuthStore, DEFAULT_USER, type StoredOrg } from "./store.ts";

const TAG = "Organizations and API keys";

const orgSchema: JsonSchema = {
  type: "object",
  title: "Organization",
  required: ["id", "name", "created_at"],
  properties: { id: str, name: str, created_at: { type: "string", format: "date-time" } },
};
const createdKeySchema: JsonSchema = {
  type: "object",
  title: "CreatedApiKey",
  required: ["key", "prefix", "org_id", "user_id", "created_at"],
  properties: { key: str, prefix: str, org_id: str, user_id: str, description: nullable(str), created_at: { type: "string", format: "date-time" } },
};
const keySummarySchema: JsonSchema = {
  type: "object",
  title: "ApiKeySummary",
  properties: { prefix: str, org_id: str, user_id: str, user_name: nullable(str), description: nullable(str), created_at: str, revoked_at: nullable(str) },
};

const orgView = (o: StoredOrg) => ({ id: o.id, name: o.name, created_at: o.created_at });

export function authServiceRoutes(storage: ControlPlaneStorage): RouteDef[] {
  const store = new AuthStore(storage);
  return [
    route({
      method: "POST",
      path: "/v2/orgs",
      operationId: "create_org_v2_orgs_post",
      summary: "Create an organization (tenant)",
      tag: TAG,
      body: body({ name: text({ minLength: 1, maxLength: 63 }) }, ["name"]),
      response: { status: 201, schema: orgSchema },
      handler: async (ctx) => {
        const { orgId } = callerOf(ctx);
        const org = await store.createOrg(ctx.body.name, orgId);
        return json(orgView(org), 201);
      },
    }),
    route({
      method: "POST",
      path: "/v2/api-keys",
      operationId: "create_api_key_v2_api_keys_post",
      summary: "Create an API key (the key is shown only in this reply)",
      tag: TAG,
      body: body({ org: str, user: text({ minLength: 1, maxLength: 63 }), description: nullable(text({ maxLength: 500 })) }),
      bodyOptional: true,
      response: { status: 201, schema: createdKeySchema },
      handler: async (ctx) => {
        const caller = callerOf(ctx);
        const b = ctx.body;
        store.refresh();
        const org = b.org === undefined ? store.getOrg(caller.orgId) : store.findOrg(b.org);
        if (!org || (org.id !== caller.orgId && org.created_by_org !== caller.orgId)) throw notFound(`Organization ${b.org ?? caller.orgId} not found`);
        const self = org.id === caller.orgId ? caller.userId : null;
        const description = b.description ?? null;
        // Without `user`: another key of the caller (own org) or of the new org's "default" user.
        const { key, record } =
          b.user === undefined && self
            ? await store.createKey(org.id, self, description)
            : await store.createKeyForUser(org.id, b.user ?? DEFAULT_USER, self, description);
        return json(
          { key, prefix: record.prefix, org_id: record.org_id, user_id: record.user_id, description: record.description, created_at: record.created_at },
          201,
        );
      },
    }),
    route({
      method: "GET",
      path: "/v2/api-keys",
      operationId: "list_api_keys_v2_api_keys_get",
      summary: "List the API keys of the caller's organization (no secrets)",
      tag: TAG,
      response: { status: 200, schema: { type: "array", items: keySummarySchema } },
      handler: (ctx) => json(store.listKeys(callerOf(ctx).orgId)),
    }),
    route({
      method: "DELETE",
      path: "/v2/api-keys/:prefix",
      operationId: "revoke_api_key_v2_api_keys__prefix__delete",
      summary: "Revoke an API key of the caller's organization",
      tag: TAG,
      response: { status: 204, description: "Revoked" },
      handler: async (ctx) => {
        await store.revokeKey(callerOf(ctx).orgId, ctx.params.prefix);
        return empty(204);
      },
    }),
  ];
}
