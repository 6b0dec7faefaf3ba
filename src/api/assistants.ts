// Assistants: configured instances of a graph (reference §4). Records live on the HTTP thread;
// graph-introspection routes are answered by an actor worker, where graphs are loaded.
import { conflict, assistantNotFound, graphNotFound, graphNotRegistered } from "../errors.ts";
import { json, route, type AuthInfo, type RouteDef } from "../http/types.ts";
import type { Schema } from "../http/schema-types.ts";
import { asMetadata, matchesAuthFilter, type AuthEvent } from "../auth/index.ts";
import { canonicalUuid, defaultAssistantId, uuid7 } from "../util/ids.ts";
import { body, configSchema, enumOf, int, keyString, limit, nullable, object, offset, sortOrder, str, uuid, anyValue } from "../http/schemas/common.ts";
import { pageHeaders, select } from "../http/paging.ts";
import type { AppContext } from "../server/context.ts";
import { AssistantStore, type AssistantCreate, type AssistantFilter } from "../domain/assistants.ts";
import type { AssistantRecord } from "../storage/records.ts";
import { assistantSelectSchema } from "./field-select.ts";
import { graphSchemas, subgraphSchemas } from "./graph-schemas.ts";

const TAG = "assistants";

const assistantCreate = body(
  {
    assistant_id: uuid,
    graph_id: keyString,
    config: configSchema,
    context: anyValue,
    metadata: object,
    if_exists: enumOf(["raise", "do_nothing"]),
    name: str,
    description: nullable(str),
  },
  ["graph_id"],
);

const assistantPatch = body({
  graph_id: keyString,
  config: configSchema,
  context: anyValue,
  metadata: object,
  name: str,
  description: nullable(str),
});

const assistantSearch = body({
  metadata: object,
  graph_id: keyString,
  name: str,
  limit: limit(1000, 10),
  offset,
  sort_by: enumOf(["assistant_id", "graph_id", "created_at", "updated_at", "name"]),
  sort_order: sortOrder,
  select: assistantSelectSchema,
});

const boolQuery = str;
const truthy = (v: unknown): boolean => typeof v === "string" && ["true", "1", "yes"].includes(v.toLowerCase());

export function assistantRoutes(app: AppContext): RouteDef[] {
  const store = new AssistantStore(app.storage.assistants);
  /**
   * Fires `event` for the assistant a path names (graph ids resolved first), then resolves it:
   * 404 when missing or hidden by the auth filter. `value` holds the event's extra fields.
   */
  const resolve = async (auth: AuthInfo | undefined, event: AuthEvent, idOrGraph: string, value: object = {}): Promise<AssistantRecord> => {
    const id = app.graphIds.has(idOrGraph) ? defaultAssistantId(idOrGraph) : idOrGraph;
    const filter = await app.auth?.authorize(auth, event, Object.assign(value, { assistant_id: id }));
    const a = await app.resolveAssistant(idOrGraph);
    if (!matchesAuthFilter(filter, a.metadata)) throw assistantNotFound();
    return a;
  };
  const searchFilter = (auth: AuthInfo | undefined, q: AssistantFilter & { limit?: number; offset?: number }) =>
    app.auth?.authorize(auth, "assistants:search", { graph_id: q.graph_id, metadata: q.metadata, limit: q.limit ?? 0, offset: q.offset ?? 0 });
  const drawGraph = async (a: AssistantRecord, xray: boolean | number) => {
    if (!app.graphIds.has(a.graph_id)) throw graphNotRegistered(a.graph_id, a.assistant_id);
    return app.pool.request({ type: "graph.describe", assistant: a, what: "graph", xray, recurse: false });
  };

  return [
    route({
      method: "POST",
      path: "/assistants",
      operationId: "create_assistant",
      summary: "Create an assistant",
      tag: TAG,
      body: assistantCreate,
      handler: async ({ body: b, auth }) => {
        const c: AssistantCreate = { ...b };
        if (!app.graphIds.has(c.graph_id)) throw graphNotFound(c.graph_id, app.graphIds);
        c.assistant_id = c.assistant_id ? canonicalUuid(c.assistant_id) : uuid7();
        const created = {
          assistant_id: c.assistant_id,
          graph_id: c.graph_id,
          config: c.config,
          context: c.context,
          metadata: c.metadata ?? {},
          if_exists: c.if_exists,
          name: c.name,
          description: c.description,
        };
        const filter = await app.auth?.authorize(auth, "assistants:create", created);
        const existing = await store.get(c.assistant_id);
        if (existing && !matchesAuthFilter(filter, existing.metadata)) throw conflict("Assistant already exists");
        return json(await store.create({ ...c, metadata: asMetadata(created.metadata) }));
      },
    }),
    route({
      method: "POST",
      path: "/assistants/search",
      operationId: "search_assistants",
      summary: "Search assistants",
      tag: TAG,
      body: assistantSearch,
      bodyOptional: true,
      handler: async ({ body: b, auth }) => {
        const q = b;
        const filter = await searchFilter(auth, q);
        const found = await store.search({ ...q, auth: filter, sortBy: q.sort_by ?? "created_at", order: q.sort_order ?? "desc" });
        return json(select(found.items, q.select ?? undefined), 200, pageHeaders(found, q.offset));
      },
    }),
    route({
      method: "POST",
      path: "/assistants/count",
      operationId: "count_assistants",
      summary: "Count assistants",
      tag: TAG,
      body: body({ metadata: object, graph_id: str, name: str }),
      bodyOptional: true,
      handler: async ({ body: b, auth }) => {
        const filter = await searchFilter(auth, b);
        return json(await store.count({ ...b, auth: filter }));
      },
    }),
    route({
      method: "GET",
      path: "/assistants/:assistant_id",
      operationId: "get_assistant",
      summary: "Get an assistant",
      tag: TAG,
      handler: async ({ params, auth }) => json(await resolve(auth, "assistants:read", params.assistant_id)),
    }),
    route({
      method: "PATCH",
      path: "/assistants/:assistant_id",
      operationId: "patch_assistant",
      summary: "Update an assistant (creates a new version)",
      tag: TAG,
      body: assistantPatch,
      bodyOptional: true,
      handler: async ({ params, body: b, auth }) => {
        const p = b;
        if (p.graph_id !== undefined && !app.graphIds.has(p.graph_id)) throw graphNotFound(p.graph_id);
        const update = { graph_id: p.graph_id, config: p.config, metadata: p.metadata, name: p.name, description: p.description };
        const a = await resolve(auth, "assistants:update", params.assistant_id, update);
        return json(await store.patch(a.assistant_id, { ...p, metadata: update.metadata === undefined ? undefined : asMetadata(update.metadata) }));
      },
    }),
    route({
      method: "DELETE",
      path: "/assistants/:assistant_id",
      operationId: "delete_assistant",
      summary: "Delete an assistant and its versions",
      tag: TAG,
      query: body({ delete_threads: boolQuery }),
      handler: async ({ params, query, auth }) => {
        const a = await resolve(auth, "assistants:delete", params.assistant_id);
        await store.delete(a.assistant_id);
        await deleteRunsOf(app, a.assistant_id);
        if (truthy(query.delete_threads)) {
          const bound = await app.storage.threads.search({
            metadata: { assistant_id: a.assistant_id },
            sortBy: "created_at",
            order: "asc",
            offset: 0,
            limit: Number.MAX_SAFE_INTEGER,
          });
          await Promise.all(bound.items.map((t) => app.pool.deleteThread(t.thread_id).catch(() => undefined)));
        }
        return json([a.assistant_id]);
      },
    }),
    route({
      method: "POST",
      path: "/assistants/:assistant_id/versions",
      operationId: "list_assistant_versions",
      summary: "List versions of an assistant, newest first",
      tag: TAG,
      body: body({ metadata: object, limit: limit(1000, 10), offset }),
      bodyOptional: true,
      handler: async ({ params, body: b, auth }) => {
        const a = await resolve(auth, "assistants:read", params.assistant_id);
        return json(await store.versions(a.assistant_id, b));
      },
    }),
    route({
      method: "POST",
      path: "/assistants/:assistant_id/latest",
      operationId: "set_latest_assistant_version",
      summary: "Make a version the current one",
      tag: TAG,
      body: body({ version: int }, ["version"]),
      handler: async ({ params, body: b, auth }) => {
        const version = b.version;
        return json(await store.setLatest((await resolve(auth, "assistants:update", params.assistant_id, { version })).assistant_id, version));
      },
    }),
    route({
      method: "GET",
      path: "/assistants/:assistant_id/graph",
      operationId: "get_assistant_graph",
      summary: "Drawable graph of an assistant",
      tag: TAG,
      query: body({ xray: { type: ["string"] } as Schema<string> }),
      handler: async ({ params, query, auth }) => {
        const x = query.xray;
        const xray: boolean | number = x === undefined ? false : /^\d+$/.test(x) && x !== "1" && x !== "0" ? Number(x) : truthy(x);
        return json(await drawGraph(await resolve(auth, "assistants:read", params.assistant_id), xray));
      },
    }),
    route({
      method: "GET",
      path: "/assistants/:assistant_id/schemas",
      operationId: "get_assistant_schemas",
      summary: "JSON schemas of an assistant's graph",
      tag: TAG,
      handler: async ({ params, auth }) => json(await graphSchemas(app, await resolve(auth, "assistants:read", params.assistant_id))),
    }),
    route({
      method: "GET",
      path: "/assistants/:assistant_id/subgraphs",
      operationId: "get_assistant_subgraphs",
      summary: "Subgraphs of an assistant's graph",
      tag: TAG,
      query: body({ recurse: boolQuery, namespace: str }),
      handler: async ({ params, query, auth }) => {
        const q = query;
        return json(await subgraphSchemas(app, await resolve(auth, "assistants:read", params.assistant_id), q.namespace, truthy(q.recurse)));
      },
    }),
    route({
      method: "GET",
      path: "/assistants/:assistant_id/subgraphs/:namespace",
      operationId: "get_assistant_subgraphs_by_namespace",
      summary: "One subgraph of an assistant's graph",
      tag: TAG,
      query: body({ recurse: boolQuery }),
      handler: async ({ params, query, auth }) =>
        json(await subgraphSchemas(app, await resolve(auth, "assistants:read", params.assistant_id), params.namespace, truthy(query.recurse))),
    }),
  ];
}

/**
 * An assistant's delete cascades to its runs (reference §4): queued and running ones are
 * cancelled first, then every run record goes. Their threads keep their checkpoints (the state
 * those runs produced stays the threads' state, as upstream).
 */
async function deleteRunsOf(app: AppContext, assistantId: string): Promise<void> {
  const runs: { threadId: string; runId: string; active: boolean }[] = [];
  for await (const value of app.storage.runs.ofAssistant(assistantId)) {
    runs.push({ threadId: value.thread_id, runId: value.run_id, active: value.status === "pending" || value.status === "running" });
  }
  await Promise.all(
    runs.map(async ({ threadId, runId, active }) => {
      if (active) await app.pool.request({ type: "run.cancel", threadId, runId, action: "interrupt", wait: true }).catch(() => undefined);
      await app.pool.request({ type: "run.delete", threadId, runId, keepCheckpoints: true }).catch(() => undefined);
    }),
  );
}
