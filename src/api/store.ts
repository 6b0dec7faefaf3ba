// Store routes (reference §9): the long-term memory store over HTTP. Same LMDB records the
// graphs read and write through `config.store`, so items written by a run show up here.
// Item TTLs: `ttl` on put (minutes; null = none; absent = config store.ttl.default_ttl) and
// `refresh_ttl` on get/search (absent = store.ttl.refresh_on_read) — src/storage/store-ttl.ts.
// `index` on put (false, or the fields to embed) and `query` on search use the semantic index
// when the config has one (store.index, src/storage/store-index.ts).
import type { MatchCondition } from "@langchain/langgraph-checkpoint";
import { empty, json, route, type RouteDef } from "../http/types.ts";
import { body, bool, limit, nullable, object, offset, str, strings } from "../http/schemas/common.ts";
import { validationError } from "../errors.ts";
import type { Schema } from "../http/schema-types.ts";
import type { AppContext } from "../server/context.ts";
import type { ItemStore } from "../storage/port.ts";
import { StoreAccess } from "../auth/index.ts";

const TAG = "store";

// An item's LMDB key is [namespace labels joined by NUL, key] (also in store_ttl and store_vectors):
// a key of 256 characters is at most 1 KiB of UTF-8, a namespace at most MAX_NAMESPACE_BYTES, which
// leaves room under LMDB's 1,978 bytes. Prefixes and suffixes are bounded alike (they bound scans).
export const MAX_STORE_KEY_CHARS = 256;
export const MAX_NAMESPACE_LABEL_CHARS = 192;
export const MAX_NAMESPACE_BYTES = 768;
const storeKey: Schema<string> = { type: "string", maxLength: MAX_STORE_KEY_CHARS };
const labels: Schema<string[]> = {
  type: "array",
  items: { type: "string", maxLength: MAX_NAMESPACE_LABEL_CHARS },
  description: `Namespace labels; at most ${MAX_NAMESPACE_BYTES} bytes of UTF-8 in all, counting one separator between labels`,
};

const indexFields: Schema<false | string[] | null> = { anyOf: [{ const: false }, strings, { type: "null" }] };
const ttlMinutes: Schema<number | null> = { type: ["number", "null"], minimum: 0 };
const itemPut = body({ namespace: labels, key: storeKey, value: object, index: indexFields, ttl: ttlMinutes }, ["namespace", "key", "value"]);
const itemDelete = body({ namespace: labels, key: storeKey }, ["key"]);
const itemQuery = body({ namespace: { type: "string", maxLength: MAX_NAMESPACE_BYTES } as Schema<string>, key: storeKey, refresh_ttl: bool }, ["key"]);
const itemSearch = body(
  {
    namespace_prefix: labels,
    filter: nullable(object),
    limit: limit(1000, 10),
    offset,
    query: nullable(str),
    refresh_ttl: { type: ["boolean", "null"] } as Schema<boolean | null>,
  },
  ["namespace_prefix"],
);
const namespaceList = body({
  prefix: nullable(labels),
  suffix: nullable(labels),
  max_depth: { type: ["integer", "null"], minimum: 1 } as Schema<number | null>,
  limit: limit(1000, 100),
  offset,
});

/** Namespace rules of the reference: labels non-empty, no "." (the GET query joins with it); NUL is our key separator. */
function checkNamespace(ns: string[], loc: string[], required: boolean): void {
  if (required && ns.length === 0) throw validationError([{ loc, msg: "Namespace is required", type: "value_error" }]);
  if (ns.some((l) => l === "" || l.includes("."))) {
    throw validationError([{ loc, msg: `Namespace labels cannot be empty or contain periods. Received: ${ns.join(".")}`, type: "value_error" }]);
  }
  if (ns.some((l) => l.includes("\u0000"))) {
    throw validationError([{ loc, msg: "Namespace labels cannot contain NUL characters", type: "value_error" }]);
  }
  checkNamespaceSize(ns, loc);
}

function checkNamespaceSize(ns: readonly string[], loc: string[]): void {
  let bytes = Math.max(0, ns.length - 1);
  for (const l of ns) bytes += Buffer.byteLength(l);
  if (bytes > MAX_NAMESPACE_BYTES) {
    throw validationError([
      { loc, msg: `Namespace should have at most ${MAX_NAMESPACE_BYTES} bytes of UTF-8 (labels and separators), got ${bytes}`, type: "string_too_long" },
    ]);
  }
}

export function storeRoutes(app: AppContext): RouteDef[] {
  const ttl = app.storeTtl;
  // Loaded on the first store request: LmdbStore extends LangGraph's BaseStore, and importing it
  // pulls @langchain/core (~470 modules, ~45 MB of heap) into the HTTP thread, which needs none
  // of it otherwise.
  let loaded: Promise<{ store: ItemStore; access: StoreAccess }> | undefined;
  const load = () =>
    (loaded ??= app.storage.store
      .open({ ttl, index: app.storeIndex })
      .then((store) => {
        /** custom auth's store:* events; a pass-through for unauthenticated requests */
        return { store, access: new StoreAccess(app.auth, store) };
      })
      .catch((err: unknown) => {
        loaded = undefined; // let a later request try again instead of failing forever
        throw err;
      }));

  return [
    route({
      method: "PUT",
      path: "/store/items",
      operationId: "put_item",
      summary: "Store or update an item",
      tag: TAG,
      body: itemPut,
      handler: async ({ body: b, auth }) => {
        const { store, access } = await load();
        const { namespace, key, value, ttl: minutes } = b;
        checkNamespace(namespace, ["body", "namespace"], true);
        const index = b.index ?? undefined;
        await store.write([{ ...(await access.put(auth, { namespace, key, value })), ...(index !== undefined ? { index } : {}) }], minutes);
        return empty(204);
      },
    }),
    route({
      method: "GET",
      path: "/store/items",
      operationId: "get_item",
      summary: "Get an item (null when absent)",
      tag: TAG,
      query: itemQuery,
      handler: async ({ query, auth }) => {
        const { store, access } = await load();
        const q = query;
        const namespace = q.namespace ? q.namespace.split(".") : [];
        checkNamespace(namespace, ["query", "namespace"], false);
        const item = await access.get(auth, { namespace, key: q.key });
        if (item && (q.refresh_ttl ?? ttl.refreshOnRead)) store.refresh([item]);
        return json(item);
      },
    }),
    route({
      method: "DELETE",
      path: "/store/items",
      operationId: "delete_item",
      summary: "Delete an item (also when absent)",
      tag: TAG,
      body: itemDelete,
      handler: async ({ body: b, auth }) => {
        const { store, access } = await load();
        const { namespace = [], key } = b;
        checkNamespace(namespace, ["body", "namespace"], false);
        await store.write([{ ...(await access.delete(auth, { namespace, key })), value: null }]);
        return empty(204);
      },
    }),
    route({
      method: "POST",
      path: "/store/items/search",
      operationId: "search_items",
      summary: "Search items under a namespace prefix",
      tag: TAG,
      body: itemSearch,
      handler: async ({ body: b, auth }) => {
        const { store, access } = await load();
        const q = b;
        checkNamespace(q.namespace_prefix, ["body", "namespace_prefix"], false);
        const items = await access.search(auth, {
          namespacePrefix: q.namespace_prefix,
          filter: q.filter ?? undefined,
          limit: q.limit,
          offset: q.offset,
          query: q.query ?? undefined,
        });
        if (q.refresh_ttl ?? ttl.refreshOnRead) store.refresh(items);
        return json({ items });
      },
    }),
    route({
      method: "POST",
      path: "/store/namespaces",
      operationId: "list_namespaces",
      summary: "List namespaces",
      tag: TAG,
      body: namespaceList,
      bodyOptional: true,
      handler: async ({ body: b, auth }) => {
        const { access } = await load();
        const q = b;
        const matchConditions: MatchCondition[] = [];
        if (q.prefix) {
          checkNamespace(q.prefix, ["body", "prefix"], false);
          matchConditions.push({ matchType: "prefix", path: q.prefix });
        }
        if (q.suffix) {
          checkNamespace(q.suffix, ["body", "suffix"], false);
          matchConditions.push({ matchType: "suffix", path: q.suffix });
        }
        const namespaces = await access.namespaces(auth, { matchConditions, maxDepth: q.max_depth ?? undefined, limit: q.limit, offset: q.offset });
        return json({ namespaces });
      },
    }),
  ];
}
