// Assistants: configured instances of a graph (reference §4). Records live on the HTTP thread;
// graph-introspection routes are answered by an actor worker, where graphs are loaded.
import { TroupeError } from "../errors.ts";
import { json, type RouteDef } from "../http/types.ts";
import { body, configSchema, int, limit, nullable, object, offset, sortOrder, str, strings, uuid, anyValue } from "../http/schemas/common.ts";
import { page, select, sortBy } from "../http/paging.ts";
import type { AppContext } from "../server/context.ts";
import { AssistantStore, type AssistantCreate, type AssistantPatch, type AssistantQuery } from "../storage/assistants.ts";
import type { AssistantRecord, JsonObject } from "../storage/records.ts";

const TAG = "assistants";

const assistantCreate = body({
  assistant_id: uuid,
  graph_id: str,
  config: configSchema,
  context: anyValue,
  metadata: object,
  if_exists: { type: "string", enum: ["raise", "do_nothing"] },
  name: str,
  description: nullable(str),
}, ["graph_id"]);

const assistantPatch = body({
  graph_id: str,
  config: configSchema,
  context: anyValue,
  metadata: object,
  name: str,
  description: nullable(str),
});

const assistantSearch = body({
  metadata: object,
  graph_id: str,
  name: str,
  limit: limit(1000, 10),
  offset,
  sort_by: { type: "string", enum: ["assistant_id", "graph_id", "created_at", "updated_at", "name"] },
  sort_order: sortOrder,
  select: strings,
});

const boolQuery = { type: "string" } as const;
const truthy = (v: unknown): boolean => typeof v === "string" && ["true", "1", "yes"].includes(v.toLowerCase());

export function assistantRoutes(app: AppContext): RouteDef<any, any>[] {
  const store = new AssistantStore(app.storage);
  const resolve = (id: string): AssistantRecord => app.resolveAssistant(id);
  const describe = (what: "graph" | "schemas" | "subgraphs") =>
    async (a: AssistantRecord, xray: boolean | number, namespace: string | undefined, recurse: boolean) => {
      if (!app.graphIds.has(a.graph_id)) throw new TroupeError("NOT_FOUND", `Graph "${a.graph_id}" of assistant ${a.assistant_id} is not registered`);
      return app.pool.request({ type: "graph.describe", assistant: a, what, xray, namespace, recurse });
    };

  return [
    {
      method: "POST", path: "/assistants", operationId: "create_assistant", summary: "Create an assistant", tag: TAG,
      body: assistantCreate,
      handler: async ({ body: b }) => {
        const c = b as AssistantCreate;
        if (!app.graphIds.has(c.graph_id)) throw new TroupeError("NOT_FOUND", `Graph "${c.graph_id}" not found. Registered graphs: ${[...app.graphIds].join(", ")}`);
        return json(await store.create(c));
      },
    },
    {
      method: "POST", path: "/assistants/search", operationId: "search_assistants", summary: "Search assistants", tag: TAG,
      body: assistantSearch, bodyOptional: true,
      handler: ({ body: b }) => {
        const q = b as AssistantQuery & { limit: number; offset: number; sort_by?: keyof AssistantRecord; sort_order?: "asc" | "desc"; select?: string[] };
        const sorted = sortBy(store.search(q), q.sort_by ?? "created_at", q.sort_order ?? "desc");
        const p = page(sorted, q.offset, q.limit);
        return json(select(p.items, q.select), 200, p.headers);
      },
    },
    {
      method: "POST", path: "/assistants/count", operationId: "count_assistants", summary: "Count assistants", tag: TAG,
      body: body({ metadata: object, graph_id: str, name: str }), bodyOptional: true,
      handler: ({ body: b }) => json(store.search(b as AssistantQuery).length),
    },
    {
      method: "GET", path: "/assistants/:assistant_id", operationId: "get_assistant", summary: "Get an assistant", tag: TAG,
      handler: ({ params }) => json(resolve(params.assistant_id)),
    },
    {
      method: "PATCH", path: "/assistants/:assistant_id", operationId: "patch_assistant", summary: "Update an assistant (creates a new version)", tag: TAG,
      body: assistantPatch, bodyOptional: true,
      handler: async ({ params, body: b }) => {
        const p = b as AssistantPatch;
        if (p.graph_id !== undefined && !app.graphIds.has(p.graph_id)) throw new TroupeError("NOT_FOUND", `Graph "${p.graph_id}" not found`);
        return json(await store.patch(resolve(params.assistant_id).assistant_id, p));
      },
    },
    {
      method: "DELETE", path: "/assistants/:assistant_id", operationId: "delete_assistant", summary: "Delete an assistant and its versions", tag: TAG,
      query: { type: "object", properties: { delete_threads: boolQuery } },
      handler: async ({ params, query }) => {
        const a = resolve(params.assistant_id);
        await store.delete(a.assistant_id);
        if (truthy((query as { delete_threads?: string }).delete_threads)) {
          const ids: string[] = [];
          for (const { key, value } of app.storage.threads.getRange({})) if (value.metadata.assistant_id === a.assistant_id) ids.push(key);
          await Promise.all(ids.map((threadId) => app.pool.request({ type: "thread.delete", threadId }).catch(() => undefined)));
        }
        return json([a.assistant_id]);
      },
    },
    {
      method: "POST", path: "/assistants/:assistant_id/versions", operationId: "list_assistant_versions", summary: "List versions of an assistant, newest first", tag: TAG,
      body: body({ metadata: object, limit: limit(1000, 10), offset }), bodyOptional: true,
      handler: ({ params, body: b }) => {
        const a = resolve(params.assistant_id);
        return json(store.versions(a.assistant_id, b as { metadata?: JsonObject; limit: number; offset: number }));
      },
    },
    {
      method: "POST", path: "/assistants/:assistant_id/latest", operationId: "set_latest_assistant_version", summary: "Make a version the current one", tag: TAG,
      body: body({ version: int }, ["version"]),
      handler: async ({ params, body: b }) => json(await store.setLatest(resolve(params.assistant_id).assistant_id, (b as { version: number }).version)),
    },
    {
      method: "GET", path: "/assistants/:assistant_id/graph", operationId: "get_assistant_graph", summary: "Drawable graph of an assistant", tag: TAG,
      query: { type: "object", properties: { xray: { type: ["string"] } } },
      handler: async ({ params, query }) => {
        const x = (query as { xray?: string }).xray;
        const xray: boolean | number = x === undefined ? false : /^\d+$/.test(x) && x !== "1" && x !== "0" ? Number(x) : truthy(x);
        return json(await describe("graph")(resolve(params.assistant_id), xray, undefined, false));
      },
    },
    {
      method: "GET", path: "/assistants/:assistant_id/schemas", operationId: "get_assistant_schemas", summary: "JSON schemas of an assistant's graph", tag: TAG,
      handler: async ({ params }) => json(await describe("schemas")(resolve(params.assistant_id), false, undefined, false)),
    },
    {
      method: "GET", path: "/assistants/:assistant_id/subgraphs", operationId: "get_assistant_subgraphs", summary: "Subgraphs of an assistant's graph", tag: TAG,
      query: { type: "object", properties: { recurse: boolQuery, namespace: str } },
      handler: async ({ params, query }) => {
        const q = query as { recurse?: string; namespace?: string };
        return json(await describe("subgraphs")(resolve(params.assistant_id), false, q.namespace, truthy(q.recurse)));
      },
    },
    {
      method: "GET", path: "/assistants/:assistant_id/subgraphs/:namespace", operationId: "get_assistant_subgraphs_by_namespace", summary: "One subgraph of an assistant's graph", tag: TAG,
      query: { type: "object", properties: { recurse: boolQuery } },
      handler: async ({ params, query }) =>
        json(await describe("subgraphs")(resolve(params.assistant_id), false, params.namespace, truthy((query as { recurse?: string }).recurse))),
    },
  ];
}
