// Crons (reference §2.8, §8): periodic runs on a schedule. Records live on the HTTP thread;
// the CronScheduler (src/crons/) fires them. Handlers validate, write, then (re)schedule.
import { TroupeError, cronNotFound, threadNotFound } from "../errors.ts";
import { empty, json, route, type AuthInfo, type RouteDef } from "../http/types.ts";
import { asMetadata, matchesAuthFilter, type AuthEvent, type AuthFilter } from "../auth/index.ts";
import { body, bool, enumOf, keyString, limit, nullable, object, offset, sortOrder, str, text, uuid } from "../http/schemas/common.ts";
import { pageHeaders, select } from "../http/paging.ts";
import type { AppContext } from "../server/context.ts";
import type { CronRecord } from "../storage/records.ts";
import type { CronFilter, CronSort } from "../storage/port.ts";
import { defaultAssistantId, uuid7 } from "../util/ids.ts";
import { newCronRecord, patchCronRecord, type CronCreate } from "../crons/cron-record.ts";
import { PAYLOAD_FIELDS, type PayloadField } from "../crons/payload.ts";
import type { CronRunner, CronScheduler } from "../crons/scheduler.ts";
import { checkSchedule, checkTimezone } from "../crons/schedule.ts";
import { buildCreateRun, runCreateFields, type RunCreateBody } from "./run-request.ts";
import { cronSelectSchema } from "./field-select.ts";

const TAG = "crons";
const SORT_FIELDS = ["cron_id", "assistant_id", "thread_id", "next_run_date", "end_time", "created_at", "updated_at"] as const satisfies readonly CronSort[];

/** The run fields a cron replays on each tick, as RunCreate has them, in PAYLOAD_FIELDS order. */
const payloadFields = Object.fromEntries(PAYLOAD_FIELDS.map((f) => [f, runCreateFields[f]])) as Pick<typeof runCreateFields, PayloadField>;
const cronFields = {
  ...payloadFields,
  schedule: str,
  timezone: nullable(str),
  metadata: nullable(object),
  enabled: nullable(bool),
  end_time: nullable(text({ format: "date-time" })),
  on_run_completed: nullable(enumOf(["delete", "keep"])),
};
export const cronCreateSchema = body({ ...cronFields, assistant_id: keyString }, ["assistant_id", "schedule"]);
export const cronPatchSchema = body(cronFields);
const filterFields = { assistant_id: nullable(keyString), thread_id: nullable(uuid), metadata: nullable(object) };
const cronSearch = body({
  ...filterFields,
  enabled: nullable(bool),
  limit: limit(1000, 10),
  offset,
  sort_by: nullable(enumOf(SORT_FIELDS)),
  sort_order: nullable(sortOrder),
  select: cronSelectSchema,
});

/** The RunCreate body of one tick. Runs are tagged with `cron_id` in their metadata. */
export function runBodyOf(rec: CronRecord): RunCreateBody {
  const p = rec.payload as Partial<RunCreateBody>;
  const stateless = rec.thread_id === null;
  return {
    ...p,
    assistant_id: rec.assistant_id,
    metadata: { ...rec.metadata, cron_id: rec.cron_id },
    ...(stateless ? { on_completion: rec.on_run_completed ?? "delete", multitask_strategy: undefined } : {}),
  };
}

/** What a cron tick does in the server: create its run exactly as the runs API would. */
export function cronRunner(app: AppContext): CronRunner {
  return {
    async createRun(rec) {
      if (rec.thread_id !== null && !(await app.storage.threads.get(rec.thread_id))) return { gone: `thread ${rec.thread_id}` };
      if (!(await app.storage.assistants.get(rec.assistant_id))) return { gone: `assistant ${rec.assistant_id}` };
      const stateless = rec.thread_id === null;
      // read now, no cache: a tick a minute at most, and the read above decides `gone`
      const cmd = await buildCreateRun(
        app,
        runBodyOf(rec),
        {},
        { threadId: rec.thread_id ?? uuid7(), runId: uuid7(), stateless, observed: false, freshAssistant: true },
      );
      try {
        await app.pool.createRun(cmd);
      } catch (err) {
        // a thread cron with multitask_strategy "reject" skips ticks while the thread is busy
        if (!(err instanceof TroupeError && err.code === "MULTITASK_REJECTED")) throw err;
      }
      return {};
    },
  };
}

export function cronRoutes(app: AppContext, scheduler: CronScheduler): RouteDef[] {
  const { store } = scheduler;
  /** The cron, or 404 when it is missing or the auth filter hides it. */
  const mustCron = async (id: string, filter?: AuthFilter): Promise<CronRecord> => {
    const c = await store.get(id);
    if (!c || !matchesAuthFilter(filter, c.metadata)) throw cronNotFound(id);
    return c;
  };
  const authorize = (auth: AuthInfo | undefined, event: AuthEvent, value: object) => app.auth?.authorize(auth, event, value);
  /** Building a run for the cron checks what a tick would (assistant's graph, webhook policy). */
  const checkRunnable = async (rec: CronRecord): Promise<void> =>
    void (await buildCreateRun(
      app,
      runBodyOf(rec),
      {},
      { threadId: rec.thread_id ?? uuid7(), runId: uuid7(), stateless: rec.thread_id === null, freshAssistant: true },
    ));
  /** Filters accept a graph id where an assistant id is expected (reference §1.4). */
  const filterOf = (q: CronFilter): CronFilter => ({
    ...q,
    assistant_id: q.assistant_id && app.graphIds.has(q.assistant_id) ? defaultAssistantId(q.assistant_id) : q.assistant_id,
  });

  const create = async (body: CronCreate, threadId: string | null, auth: AuthInfo | undefined): Promise<CronRecord> => {
    const userId = auth?.identity ?? null;
    const cronId = uuid7();
    const created = {
      payload: { ...body },
      schedule: body.schedule,
      cron_id: cronId,
      thread_id: threadId,
      user_id: userId,
      end_time: body.end_time,
      metadata: body.metadata ?? {},
    };
    await authorize(auth, "crons:create", created);
    const b: CronCreate = { ...body, metadata: asMetadata(created.metadata) };
    const assistant = await app.resolveAssistant(b.assistant_id);
    await app.auth?.authorizeAssistant(auth, assistant); // its ticks run it: 404 for an assistant the caller cannot read
    // a thread cron runs on the thread: the caller must be able to see it
    const threadFilter = threadId === null ? undefined : await authorize(auth, "threads:read", { thread_id: threadId });
    const thread = threadId === null ? undefined : await app.storage.threads.get(threadId);
    if (threadId !== null && (!thread || !matchesAuthFilter(threadFilter, thread.metadata))) throw threadNotFound(threadId);
    if (b.timezone) checkTimezone(b.timezone);
    checkSchedule(b.schedule, b.timezone ?? null);
    const rec = newCronRecord(b, { cronId, assistantId: assistant.assistant_id, threadId, userId });
    await checkRunnable(rec);
    await store.put(rec);
    scheduler.schedule(rec);
    return rec;
  };

  return [
    route({
      method: "POST",
      path: "/threads/:thread_id/runs/crons",
      operationId: "create_thread_cron",
      summary: "Create a cron that runs on a thread",
      tag: TAG,
      params: { thread_id: "uuid" },
      body: cronCreateSchema,
      handler: async ({ params, body: b, auth }) => json(await create(b, params.thread_id, auth)),
    }),
    route({
      method: "POST",
      path: "/runs/crons",
      operationId: "create_cron",
      summary: "Create a stateless cron (a new thread per run)",
      tag: TAG,
      body: cronCreateSchema,
      handler: async ({ body: b, auth }) => json(await create(b, null, auth)),
    }),
    route({
      method: "POST",
      path: "/runs/crons/search",
      operationId: "search_crons",
      summary: "Search crons",
      tag: TAG,
      body: cronSearch,
      bodyOptional: true,
      handler: async ({ body: q, auth }) => {
        const filter = await authorize(auth, "crons:search", { assistant_id: q.assistant_id, thread_id: q.thread_id, limit: q.limit, offset: q.offset });
        const found = await store.search({
          ...filterOf(q),
          auth: filter,
          sortBy: q.sort_by ?? "created_at",
          order: q.sort_order ?? "desc",
          offset: q.offset,
          limit: q.limit,
        });
        return json(select(found.items, q.select ?? undefined), 200, pageHeaders(found, q.offset));
      },
    }),
    route({
      method: "POST",
      path: "/runs/crons/count",
      operationId: "count_crons",
      summary: "Count crons",
      tag: TAG,
      body: body({ ...filterFields, enabled: nullable(bool) }),
      bodyOptional: true,
      handler: async ({ body: q, auth }) => {
        const filter = await authorize(auth, "crons:search", { assistant_id: q.assistant_id, thread_id: q.thread_id, limit: 0, offset: 0 });
        return json(await store.count({ ...filterOf(q), auth: filter }));
      },
    }),
    route({
      method: "PATCH",
      path: "/runs/crons/:cron_id",
      operationId: "update_cron",
      summary: "Update a cron (schedule changes reschedule it)",
      tag: TAG,
      params: { cron_id: "uuid" },
      body: cronPatchSchema,
      bodyOptional: true,
      handler: async ({ params, body: p, auth }) => {
        const cur = await mustCron(params.cron_id, await authorize(auth, "crons:update", { cron_id: params.cron_id, payload: { ...p }, schedule: p.schedule }));
        if (p.timezone) checkTimezone(p.timezone);
        if (p.schedule !== undefined || p.timezone !== undefined) {
          checkSchedule(p.schedule ?? cur.schedule, p.timezone === undefined ? cur.timezone : p.timezone);
        }
        await checkRunnable(patchCronRecord(cur, p));
        const updated = await store.update(params.cron_id, (cur) => patchCronRecord(cur, p));
        if (!updated) throw cronNotFound(params.cron_id);
        scheduler.schedule(updated);
        return json(updated);
      },
    }),
    route({
      method: "DELETE",
      path: "/runs/crons/:cron_id",
      operationId: "delete_cron",
      summary: "Delete a cron",
      tag: TAG,
      params: { cron_id: "uuid" },
      handler: async ({ params, auth }) => {
        await mustCron(params.cron_id, await authorize(auth, "crons:delete", { cron_id: params.cron_id }));
        scheduler.unschedule(params.cron_id);
        if (!(await store.remove(params.cron_id))) throw cronNotFound(params.cron_id);
        await scheduler.deleted(params.cron_id); // cluster: its tick claims go
        return empty(204);
      },
    }),
  ];
}
