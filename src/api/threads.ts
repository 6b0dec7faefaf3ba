// Threads (reference §5): records are read here on the HTTP thread; every mutation and every
// state/history read goes to the thread's actor, which owns the thread and has the graph loaded.
import { conflict, TroupeError, threadNotFound } from "../errors.ts";
import { asMetadata, matchesAuthFilter, type AuthEvent, type AuthFilter } from "../auth/index.ts";
import { canonicalUuid, uuid7 } from "../util/ids.ts";
import { deepEqual } from "../util/deep-equal.ts";
import type { CheckpointSelector } from "../bridge/messages.ts";
import { empty, json, route, type AuthInfo, type RouteDef } from "../http/types.ts";
import {
  arrayOf,
  body,
  bool,
  checkpointIdString,
  checkpointSelector,
  enumOf,
  integer,
  keyString,
  limit,
  nullable,
  object,
  offset,
  sortOrder,
  str,
  uuid,
  withDefault,
} from "../http/schemas/common.ts";

/** A state update's values (reference: ThreadStateUpdate): an object, a list of them, or null. */
const stateValues: Schema<JsonObject | JsonObject[] | null> = { type: ["object", "array", "null"], items: object };
import { pageHeaders, select } from "../http/paging.ts";
import type { Schema } from "../http/schema-types.ts";
import type { AppContext } from "../server/context.ts";
import type { JsonObject, ThreadRecord, ThreadStatus } from "../storage/records.ts";
import { threadView } from "../storage/thread-values.ts";
import type { ThreadFilter } from "../storage/port.ts";
import { threadStreamRoutes } from "./thread-stream.ts";
import { threadProtocolRoutes } from "./thread-protocol.ts";
import { selectState, stateSelectSchema, threadSelectSchema } from "./field-select.ts";
import { extractFields, extractSchema } from "./extract.ts";

const TAG = "threads";
const threadStatus = enumOf(["idle", "busy", "interrupted", "error"]);
const truthy = (v: unknown): boolean => typeof v === "string" && ["true", "1", "yes"].includes(v.toLowerCase());

/** `ttl` of a thread (SDK): minutes, or {ttl: minutes, strategy: "delete"}; null removes it (src/ttl/thread-sweeper.ts). */
const ttlSchema: Schema<TtlParam> = {
  anyOf: [
    { type: "number", minimum: 0 },
    { type: "object", properties: { ttl: { type: "number", minimum: 0 }, strategy: { type: "string", enum: ["delete"] } }, required: ["ttl"] },
    { type: "null" },
  ],
};
type TtlParam = number | { ttl: number; strategy?: "delete" } | null;

const threadCreate = body({
  thread_id: uuid,
  metadata: nullable(object),
  if_exists: nullable(enumOf(["raise", "do_nothing"])),
  graph_id: nullable(keyString),
  ttl: ttlSchema,
  supersteps: nullable(
    arrayOf(
      body(
        {
          updates: arrayOf(body({ values: stateValues, command: nullable(object), as_node: str }, ["as_node"]), { minItems: 1 }),
        },
        ["updates"],
      ),
    ),
  ),
});

const threadSearch = body({
  metadata: nullable(object),
  values: nullable(object),
  ids: nullable(arrayOf(uuid)),
  status: nullable(threadStatus),
  limit: limit(1000, 10),
  offset,
  sort_by: nullable(enumOf(["thread_id", "status", "created_at", "updated_at"])),
  sort_order: nullable(sortOrder),
  select: threadSelectSchema,
  extract: extractSchema,
});

interface ThreadQuery {
  metadata?: JsonObject | null;
  values?: JsonObject | null;
  ids?: string[] | null;
  status?: ThreadStatus | null;
}

const historyBody = body({
  limit: withDefault(integer({ minimum: 1 }), 10),
  before: nullable({
    anyOf: [
      checkpointIdString,
      {
        type: "object",
        properties: {
          checkpoint_id: checkpointIdString,
          checkpoint_ns: keyString,
          configurable: { type: "object", properties: { checkpoint_id: checkpointIdString, checkpoint_ns: keyString } },
        },
      },
    ],
  }),
  metadata: nullable(object),
  checkpoint: nullable(checkpointSelector),
  select: nullable(stateSelectSchema),
});

/** `before` may be a checkpoint id or (SDK, RemoteGraph) a config/checkpoint object. */
function beforeId(before: unknown): string | undefined {
  if (typeof before === "string") return before;
  if (before && typeof before === "object") {
    const o = before as { checkpoint_id?: string; configurable?: { checkpoint_id?: string } };
    return o.checkpoint_id ?? o.configurable?.checkpoint_id;
  }
  return undefined;
}

export function threadRoutes(app: AppContext): RouteDef[] {
  const { pool, storage } = app;
  const streams = pool.threadStreams; // GET /threads/{t}/stream listeners
  /** The thread, or 404 when it is missing or the auth filter hides it. */
  const mustThread = async (id: string, filter?: AuthFilter): Promise<ThreadRecord> => {
    const t = await storage.threads.get(id);
    if (!t || !matchesAuthFilter(filter, t.metadata)) throw threadNotFound(id);
    return t;
  };
  const authorize = (auth: AuthInfo | undefined, event: AuthEvent, value: object) => app.auth?.authorize(auth, event, value);
  /** the API view of a thread: the record plus its state values */
  const view = (t: ThreadRecord) => threadView(storage.threads, t);
  /** Stores (or with null, removes) a thread's own TTL in minutes; committed before the reply. */
  const setTtl = async (threadId: string, ttl: TtlParam): Promise<void> => {
    const minutes = ttl === null || ttl === undefined ? undefined : typeof ttl === "number" ? ttl : ttl.ttl;
    await storage.threads.setTtl(threadId, minutes ?? null);
  };
  /** The search's conditions as a storage query (ids in canonical form). */
  const threadFilter = (q: ThreadQuery, filter: AuthFilter | undefined): ThreadFilter => ({
    metadata: q.metadata,
    values: q.values,
    status: q.status,
    auth: filter,
    ids: q.ids?.map(canonicalUuid),
  });
  const graphAssistant = (t: ThreadRecord) => {
    const g = t.metadata.graph_id;
    return typeof g === "string" && app.graphIds.has(g) ? app.resolveAssistant(g) : undefined;
  };
  const threadParams = { thread_id: "uuid" } as const;
  const state = async (
    auth: AuthInfo | undefined,
    threadId: string,
    checkpoint: CheckpointSelector | undefined,
    subgraphs: boolean,
    fields?: string[] | null,
  ) => {
    const t = await mustThread(threadId, await authorize(auth, "threads:read", { thread_id: threadId }));
    const s = await pool.request({ type: "thread.state", threadId, checkpoint, subgraphs, assistant: await graphAssistant(t) });
    return json(selectState(s as unknown as Record<string, unknown>, fields));
  };
  const stateQuery = body({ subgraphs: str, select: stateSelectSchema });

  return [
    route({
      method: "POST",
      path: "/threads",
      operationId: "create_thread",
      summary: "Create a thread",
      tag: TAG,
      body: threadCreate,
      bodyOptional: true,
      handler: async ({ body: b, auth }) => {
        const c = b;
        const metadata: JsonObject = { ...(c.metadata ?? {}) };
        if (c.graph_id) metadata.graph_id = c.graph_id;
        // an id we generate names no thread yet: nothing to read before the create
        const fresh = !c.thread_id;
        const threadId = fresh ? uuid7() : canonicalUuid(c.thread_id!);
        const created = { thread_id: threadId, metadata, if_exists: c.if_exists ?? "raise" };
        const filter = await authorize(auth, "threads:create", created);
        const existing = fresh ? undefined : await storage.threads.get(threadId);
        if (existing && !matchesAuthFilter(filter, existing.metadata)) throw conflict("Thread already exists");
        const thread = await pool.request({
          type: "thread.create",
          threadId,
          metadata: asMetadata(created.metadata),
          ifExists: c.if_exists ?? "raise",
          supersteps: c.supersteps ?? undefined,
          fresh,
        });
        // a new thread takes the request's ttl (none: the config default, if any; an id we generated
        // has no TTL row to remove); an existing one keeps its own
        if (!existing && (b.ttl != null || !fresh)) await setTtl(threadId, b.ttl ?? null);
        // a thread created just now without supersteps has no values yet
        return json(fresh && !c.supersteps?.length ? thread : await view(thread));
      },
    }),
    route({
      method: "POST",
      path: "/threads/search",
      operationId: "search_threads",
      summary: "Search threads",
      tag: TAG,
      body: threadSearch,
      bodyOptional: true,
      handler: async ({ body: b, auth }) => {
        const q = b;
        const filter = await authorize(auth, "threads:search", {
          metadata: q.metadata,
          ids: q.ids,
          status: q.status,
          values: q.values,
          limit: q.limit,
          offset: q.offset,
        });
        const found = await storage.threads.search({
          ...threadFilter(q, filter),
          sortBy: q.sort_by ?? "created_at",
          order: q.sort_order ?? "desc",
          offset: q.offset,
          limit: q.limit,
        });
        const extract = q.extract && Object.keys(q.extract).length ? q.extract : undefined;
        const withValues = !q.select?.length || q.select.includes("values") || extract !== undefined;
        const threads = withValues ? await Promise.all(found.items.map(view)) : found.items;
        const selected = select(threads, q.select ?? undefined) as Record<string, unknown>[];
        if (extract) selected.forEach((t, i) => (t.extracted = extractFields(threads[i], extract)));
        return json(selected, 200, pageHeaders(found, q.offset));
      },
    }),
    route({
      method: "POST",
      path: "/threads/count",
      operationId: "count_threads",
      summary: "Count threads",
      tag: TAG,
      body: body({ metadata: nullable(object), values: nullable(object), status: nullable(threadStatus) }),
      bodyOptional: true,
      handler: async ({ body: b, auth }) => {
        const q = b;
        const filter = await authorize(auth, "threads:search", { metadata: q.metadata, values: q.values, status: q.status, limit: 0, offset: 0 });
        return json(await storage.threads.count(threadFilter(q, filter)));
      },
    }),
    route({
      method: "POST",
      path: "/threads/prune",
      operationId: "prune_threads",
      summary: "Delete threads or keep only their latest state",
      tag: TAG,
      // delete: threads and all their data; keep_latest: only checkpoints older than the latest
      // (threads with a run queued or in flight are skipped and not counted)
      body: body({ thread_ids: arrayOf(uuid), strategy: withDefault(enumOf(["delete", "keep_latest"]), "delete") }, ["thread_ids"]),
      handler: async ({ body: b, auth }) => {
        const q = b;
        let pruned = 0;
        for (const threadId of q.thread_ids) {
          const t = await storage.threads.get(threadId);
          if (q.strategy === "keep_latest") {
            if (!t || !matchesAuthFilter(await authorize(auth, "threads:update", { thread_id: threadId }), t.metadata)) continue;
            if ((await pool.request({ type: "thread.prune_history", threadId })).pruned) pruned++;
            continue;
          }
          if (!t || !matchesAuthFilter(await authorize(auth, "threads:delete", { thread_id: threadId }), t.metadata)) continue;
          await pool.deleteThread(threadId);
          pruned++;
        }
        return json({ pruned_count: pruned });
      },
    }),
    route({
      method: "GET",
      path: "/threads/:thread_id",
      operationId: "get_thread",
      summary: "Get a thread",
      tag: TAG,
      params: threadParams,
      query: { type: "object", properties: { include: {} } },
      handler: async ({ params, auth }) =>
        json(await view(await mustThread(params.thread_id, await authorize(auth, "threads:read", { thread_id: params.thread_id })))),
    }),
    route({
      method: "PATCH",
      path: "/threads/:thread_id",
      operationId: "patch_thread",
      summary: "Merge metadata into a thread",
      tag: TAG,
      params: threadParams,
      body: body({ metadata: object, ttl: ttlSchema }),
      bodyOptional: true,
      handler: async ({ params, body: b, auth }) => {
        const patch = { thread_id: params.thread_id, metadata: b.metadata ?? {} };
        await mustThread(params.thread_id, await authorize(auth, "threads:update", patch));
        const thread = await pool.request({ type: "thread.patch", threadId: params.thread_id, metadata: asMetadata(patch.metadata) });
        const ttl = b.ttl;
        if (ttl !== undefined) await setTtl(params.thread_id, ttl);
        return json(await view(thread));
      },
    }),
    route({
      method: "DELETE",
      path: "/threads/:thread_id",
      operationId: "delete_thread",
      summary: "Delete a thread, its runs and checkpoints",
      tag: TAG,
      params: threadParams,
      handler: async ({ params, auth }) => {
        await mustThread(params.thread_id, await authorize(auth, "threads:delete", { thread_id: params.thread_id }));
        await pool.deleteThread(params.thread_id);
        return empty(204);
      },
    }),
    route({
      method: "POST",
      path: "/threads/:thread_id/copy",
      operationId: "copy_thread",
      summary: "Copy a thread with its history",
      tag: TAG,
      params: threadParams,
      handler: async ({ params, auth }) => {
        const source = await mustThread(params.thread_id, await authorize(auth, "threads:read", { thread_id: params.thread_id }));
        const newThreadId = uuid7();
        const created = { thread_id: newThreadId, metadata: { ...source.metadata, thread_id: newThreadId }, if_exists: "raise" };
        await authorize(auth, "threads:create", created);
        const copy = await pool.request({ type: "thread.copy", threadId: params.thread_id, newThreadId });
        // metadata the create handler changed is merged into the copy
        const changed = asMetadata(created.metadata);
        return json(
          await view(deepEqual(changed, copy.metadata) ? copy : await pool.request({ type: "thread.patch", threadId: newThreadId, metadata: changed })),
        );
      },
    }),
    route({
      method: "GET",
      path: "/threads/:thread_id/state",
      operationId: "get_thread_state",
      summary: "Latest state of a thread",
      tag: TAG,
      params: threadParams,
      query: stateQuery,
      handler: ({ params, query, auth }) => state(auth, params.thread_id, undefined, truthy(query.subgraphs), query.select),
    }),
    route({
      method: "GET",
      path: "/threads/:thread_id/state/:checkpoint_id",
      operationId: "get_thread_state_at_checkpoint",
      summary: "State of a thread at a checkpoint",
      tag: TAG,
      params: { thread_id: "uuid", checkpoint_id: "uuid" },
      query: stateQuery,
      handler: ({ params, query, auth }) => state(auth, params.thread_id, { checkpoint_id: params.checkpoint_id }, truthy(query.subgraphs), query.select),
    }),
    route({
      method: "POST",
      path: "/threads/:thread_id/state/checkpoint",
      operationId: "post_thread_state_at_checkpoint",
      summary: "State of a thread at a checkpoint (body form)",
      tag: TAG,
      params: threadParams,
      body: body({ checkpoint: nullable(checkpointSelector), subgraphs: nullable(bool), select: nullable(stateSelectSchema) }),
      bodyOptional: true,
      handler: ({ params, body: b, auth }) => {
        const q = b;
        return state(auth, params.thread_id, q.checkpoint ?? undefined, q.subgraphs ?? false, q.select);
      },
    }),
    route({
      method: "POST",
      path: "/threads/:thread_id/state",
      operationId: "update_thread_state",
      summary: "Update a thread's state as if a node wrote it",
      tag: TAG,
      params: threadParams,
      body: body({ values: stateValues, as_node: nullable(str), checkpoint_id: nullable(uuid), checkpoint: nullable(checkpointSelector) }),
      handler: async ({ params, body: b, auth }) => {
        const filter = await authorize(auth, "threads:update", { thread_id: params.thread_id });
        const t = await mustThread(params.thread_id);
        if (!matchesAuthFilter(filter, t.metadata)) throw new TroupeError("FORBIDDEN", "Forbidden");
        const q = b;
        const checkpoint: CheckpointSelector | undefined = q.checkpoint ?? (q.checkpoint_id ? { checkpoint_id: q.checkpoint_id } : undefined);
        const updated = await pool.request({
          type: "thread.update_state",
          threadId: params.thread_id,
          values: q.values,
          asNode: q.as_node ?? undefined,
          checkpoint,
          assistant: await graphAssistant(t),
        });
        if (streams.has(params.thread_id)) {
          const event = { thread_id: params.thread_id, values: q.values ?? null, as_node: q.as_node ?? null, checkpoint: updated.checkpoint };
          streams.publish(params.thread_id, "state_update", "state_update", JSON.stringify(event));
        }
        return json(updated);
      },
    }),
    route({
      method: "PATCH",
      path: "/threads/:thread_id/state",
      operationId: "patch_thread_state",
      summary: "Merge metadata into the latest checkpoint (or `checkpoint_id`)",
      tag: TAG,
      params: threadParams,
      body: body({ metadata: object, checkpoint_id: nullable(uuid) }, ["metadata"]),
      handler: async ({ params, body: b, auth }) => {
        const filter = await authorize(auth, "threads:update", { thread_id: params.thread_id });
        const t = await mustThread(params.thread_id);
        if (!matchesAuthFilter(filter, t.metadata)) throw new TroupeError("FORBIDDEN", "Forbidden");
        const q = b;
        await pool.request({ type: "thread.patch_state", threadId: params.thread_id, metadata: q.metadata, checkpointId: q.checkpoint_id ?? undefined });
        return empty(204);
      },
    }),
    route({
      method: "GET",
      path: "/threads/:thread_id/history",
      operationId: "get_thread_history",
      summary: "States a thread went through, newest first",
      tag: TAG,
      params: threadParams,
      query: body({ limit: withDefault(integer({ minimum: 1 }), 10), before: checkpointIdString, select: stateSelectSchema }),
      handler: async ({ params, query, auth }) => {
        const t = await mustThread(params.thread_id, await authorize(auth, "threads:read", { thread_id: params.thread_id }));
        const q = query;
        const states = await pool.request({
          type: "thread.history",
          threadId: params.thread_id,
          limit: q.limit,
          before: q.before,
          assistant: await graphAssistant(t),
        });
        return json(states.map((s) => selectState(s as unknown as Record<string, unknown>, q.select)));
      },
    }),
    route({
      method: "POST",
      path: "/threads/:thread_id/history",
      operationId: "post_thread_history",
      summary: "States a thread went through, newest first (filters in body)",
      tag: TAG,
      params: threadParams,
      body: historyBody,
      bodyOptional: true,
      handler: async ({ params, body: b, auth }) => {
        const t = await mustThread(params.thread_id, await authorize(auth, "threads:read", { thread_id: params.thread_id }));
        const q = b;
        const states = await pool.request({
          type: "thread.history",
          threadId: params.thread_id,
          limit: q.limit,
          before: beforeId(q.before),
          metadata: q.metadata ?? undefined,
          checkpoint: q.checkpoint ?? undefined,
          assistant: await graphAssistant(t),
        });
        return json(states.map((s) => selectState(s as unknown as Record<string, unknown>, q.select)));
      },
    }),
    ...threadStreamRoutes(app),
    ...threadProtocolRoutes(app),
  ];
}
