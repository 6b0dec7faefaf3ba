// Auth service v2 token routes (platform.md §2.1): OAuth token records of the calling user.
// Replies are OAuthTokenSummary only; secrets go in on create and never come out.
import { body, bool, integer, nullable, str, strings, text } from "../../http/schemas/common.ts";
import type { JsonSchema } from "../../http/schema-types.ts";
import { empty, json, route, type RouteDef } from "../../http/types.ts";
import { callerOf } from "../auth/caller.ts";
import type { ControlPlaneStorage } from "../storage.ts";
import { TokenCipher, parseEncryptionKey } from "./cipher.ts";
import { TokenStore } from "./store.ts";
import { toSummary } from "./types.ts";

const TAG = "Auth Service v2";
const dateTime = text({ format: "date-time" });

export const OAUTH_TOKEN_SUMMARY: JsonSchema = {
  type: "object",
  title: "OAuthTokenSummary",
  description: "Public-facing token record: contains no sensitive data.",
  required: ["id", "provider_id", "created_at", "updated_at"],
  properties: {
    id: str,
    provider_id: str,
    provider_account_label: nullable(str),
    scopes: { ...strings, default: [] },
    expires_at: nullable(dateTime),
    is_default: { type: "boolean", default: false },
    created_at: dateTime,
    updated_at: dateTime,
  },
};

export const OAUTH_TOKEN_UPDATE_REQUEST = body({ provider_account_label: nullable(str), is_default: nullable(bool) }, [], { title: "OAuthTokenUpdateRequest" });

const tokenCreate = body(
  {
    provider_id: text({ minLength: 1 }),
    access_token: text({ minLength: 1 }),
    refresh_token: nullable(str),
    expires_at: nullable(dateTime),
    expires_in_seconds: nullable(integer({ minimum: 0 })),
    scopes: strings,
    provider_account_label: nullable(str),
    is_default: bool,
  },
  ["provider_id", "access_token"],
  { title: "OAuthTokenCreateRequest" },
);

const providerId = text({ minLength: 1 });
const providerQuery = body({ provider_id: providerId });
const providerRequired = body({ provider_id: providerId }, ["provider_id"]);

export interface TokenRoutesOptions {
  /** 32-byte key (base64 or hex); default: $TROUPE_TOKEN_ENCRYPTION_KEY. null/unset = creating tokens answers 503. */
  encryptionKey?: string | null;
}

export function tokenRoutes(storage: ControlPlaneStorage, opts: TokenRoutesOptions = {}): RouteDef[] {
  // An invalid key is a startup error (thrown here); a missing one only disables create.
  const cipher =
    opts.encryptionKey === undefined ? TokenCipher.fromEnv() : opts.encryptionKey === null ? null : new TokenCipher(parseEncryptionKey(opts.encryptionKey));
  const store = new TokenStore(storage, cipher);
  const summary = { status: 200, schema: OAUTH_TOKEN_SUMMARY };
  return [
    route({
      method: "POST",
      path: "/v2/auth/tokens",
      operationId: "create_token_v2_auth_tokens_post",
      summary: "Store an OAuth token (secrets encrypted at rest, never returned)",
      tag: TAG,
      body: tokenCreate,
      response: { status: 201, schema: OAUTH_TOKEN_SUMMARY },
      handler: async (ctx) => json(toSummary(await store.create(callerOf(ctx), ctx.body)), 201),
    }),
    route({
      method: "GET",
      path: "/v2/auth/tokens",
      operationId: "list_tokens_v2_auth_tokens_get",
      summary: "List OAuth Tokens For User",
      tag: TAG,
      query: providerQuery,
      response: { status: 200, schema: { type: "array", items: OAUTH_TOKEN_SUMMARY } },
      handler: (ctx) => json(store.list(callerOf(ctx), ctx.query.provider_id).map(toSummary)),
    }),
    route({
      method: "DELETE",
      path: "/v2/auth/tokens",
      operationId: "delete_tokens_for_provider_v2_auth_tokens_delete",
      summary: "Delete all of the caller's tokens for a provider",
      tag: TAG,
      query: providerRequired,
      response: { status: 200, schema: { type: "object", properties: { deleted: { type: "integer" } } } },
      handler: async (ctx) => json({ deleted: await store.deleteByProvider(callerOf(ctx), ctx.query.provider_id) }),
    }),
    route({
      method: "GET",
      path: "/v2/auth/tokens/exists",
      operationId: "check_token_exists_v2_auth_tokens_exists_get",
      summary: "Check OAuth Token Exists",
      tag: TAG,
      query: providerRequired,
      response: { status: 200, schema: { type: "object", required: ["has_token"], properties: { has_token: bool } } },
      handler: (ctx) => json({ has_token: store.exists(callerOf(ctx), ctx.query.provider_id) }),
    }),
    route({
      method: "GET",
      path: "/v2/auth/tokens/:token_id",
      operationId: "get_token_v2_auth_tokens__token_id__get",
      summary: "Get one OAuth token record",
      tag: TAG,
      params: { token_id: "string" },
      response: summary,
      handler: (ctx) => json(toSummary(store.get(callerOf(ctx), ctx.params.token_id))),
    }),
    route({
      method: "DELETE",
      path: "/v2/auth/tokens/:token_id",
      operationId: "delete_token_v2_auth_tokens__token_id__delete",
      summary: "Delete Single OAuth Token",
      tag: TAG,
      params: { token_id: "string" },
      response: { status: 204, description: "Deleted" },
      handler: async (ctx) => {
        await store.delete(callerOf(ctx), ctx.params.token_id);
        return empty(204);
      },
    }),
    route({
      method: "PATCH",
      path: "/v2/auth/tokens/:token_id/metadata",
      operationId: "update_token_label_v2_auth_tokens__token_id__metadata_patch",
      summary: "Update Token Label",
      tag: TAG,
      params: { token_id: "string" },
      body: OAUTH_TOKEN_UPDATE_REQUEST,
      response: { ...summary, description: "Successful Response" },
      handler: async (ctx) => json(toSummary(await store.updateMetadata(callerOf(ctx), ctx.params.token_id, ctx.body))),
    }),
  ];
}
