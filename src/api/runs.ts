// Thread runs and stateless runs (reference §6, §7): create (background, stream, wait), join,
// join-stream, cancel, list, get, delete, batch. Execution happens in actor workers; this file
// only turns HTTP into actor commands and run-hub subscriptions.
import { notFound, threadNotFound, runNotFound, validationError } from "../errors.ts";
import { uuid7 } from "../util/ids.ts";
import type { CreateRunCommand, RunDone, RunEvent } from "../bridge/messages.ts";
import { isFinal } from "../domain/lifecycle.ts";
import { empty, json, route, type AuthInfo, type Reply, type RouteDef, type SseReply } from "../http/types.ts";
import { matchesAuthFilter, type AuthEvent, type AuthFilter } from "../auth/index.ts";
import { anyValue, arrayOf, body, enumOf, limit, offset, str, uuid, withDefault } from "../http/schemas/common.ts";
import type { Accepted } from "../http/schema-types.ts";
import type { AppContext } from "../server/context.ts";
import type { RunRecord, RunStatus } from "../storage/records.ts";
import { buildCreateRun, createWithAssistant, runCreateSchema, type RunCreateBody } from "./run-request.ts";
import { lastEventId, sseFrame, sseSynthetic } from "../http/sse-frames.ts";
import { wireRun } from "./run-view.ts";
import { runSelectSchema } from "./field-select.ts";
import { select } from "../http/paging.ts";
import { webhookDeliveryOf } from "../webhooks/outbox.ts";
import { CreateOrder } from "./create-order.ts";

const TAG = "runs";
const stopAction = withDefault(enumOf(["interrupt", "rollback"]), "interrupt");
const joinStreamQuery = body({ cancel_on_disconnect: str, stream_mode: anyValue });
const truthy = (v: unknown): boolean => typeof v === "string" && ["true", "1", "yes"].includes(v.toLowerCase());

export function runRoutes(app: AppContext): RouteDef[] {
  const { pool, storage } = app;
  const hub = pool.runs;

  /** The thread, or 404 when it is missing or the auth filter hides it. */
  const mustThread = async (threadId: string, filter?: AuthFilter) => {
    const t = await storage.threads.get(threadId);
    if (!t || !matchesAuthFilter(filter, t.metadata)) throw threadNotFound(threadId);
    return t;
  };
  const authorize = (auth: AuthInfo | undefined, event: AuthEvent, value: object) => app.auth?.authorize(auth, event, value);
  const createOrder = new CreateOrder();
  const mustRun = async (threadId: string, runId: string): Promise<RunRecord> => {
    const r = await storage.runs.get(threadId, runId);
    if (!r) throw runNotFound();
    return r;
  };

  /**
   * `reader`: "stream", this request streams the run from its start (else its events wait in the
   * worker for a join); "wait", it answers with the run's output (else a large one stays in the worker).
   */
  const create = async (
    b: RunCreateBody,
    headers: Record<string, string>,
    threadId: string | null,
    auth: AuthInfo | undefined,
    reader?: "stream" | "wait",
  ): Promise<RunRecord> => {
    const stateless = threadId === null;
    const ids = { threadId: threadId ?? uuid7(), runId: uuid7(), stateless, auth };
    const turn = stateless ? undefined : createOrder.take(ids.threadId); // with the id: sent in id order
    pool.prepareThread(ids.threadId);
    const build = async (freshAssistant: boolean) => {
      const cmd = await buildCreateRun(app, b, headers, { ...ids, observed: reader === "stream", outputAwaited: reader === "wait", freshAssistant });
      await app.auth?.authorizeRun(auth, cmd, (id) => storage.threads.get(id));
      return cmd;
    };
    let cmd: CreateRunCommand;
    let created: Promise<RunRecord>;
    try {
      cmd = await build(false);
      if (turn) await turn.ready;
      created = pool.createRun(cmd); // posts to the shard synchronously
    } finally {
      turn?.done();
    }
    return createWithAssistant(
      cmd,
      created,
      () => build(true),
      (c) => pool.createRun(c),
    );
  };
  const location = (run: RunRecord, stateless: boolean) => (stateless ? `/runs/${run.run_id}` : `/threads/${run.thread_id}/runs/${run.run_id}`);

  /**
   * Final /wait or /join body of a run, once it has ended: its output (from the hub, or fetched
   * from its worker), else — forgotten since (retention, restart) — its error or the thread's values.
   */
  const outputOf = async (run: RunRecord, done: RunDone | undefined): Promise<string | Uint8Array> => {
    const output = done && (await pool.runOutput(done));
    if (output) return output;
    const ended = (await storage.runs.get(run.thread_id, run.run_id)) ?? run;
    if (ended.status === "error" && ended.error) return JSON.stringify({ __error__: ended.error });
    return (await storage.threads.valuesJson(run.thread_id)) ?? "null";
  };
  const joinOutput = async (run: RunRecord): Promise<string | Uint8Array> =>
    outputOf(run, isFinal(run.status) ? hub.doneOf(run.run_id) : await hub.waitFor(run.run_id));

  const streamReply = (
    run: RunRecord,
    from: "start" | "live" | number,
    opts: { withIds: boolean; cancelOnDisconnect: boolean; headers?: Record<string, string> },
  ): SseReply => ({
    kind: "sse",
    headers: opts.headers,
    start(sink) {
      let finished = false;
      const unsubscribe = hub.subscribe(run.run_id, from, {
        onEvent: (e: RunEvent) => void sink.write(sseFrame(e, opts.withIds)),
        onDone: (_d: RunDone) => {
          finished = true;
          sink.end();
        },
      });
      return () => {
        unsubscribe();
        if (!finished && opts.cancelOnDisconnect) {
          void pool.request({ type: "run.cancel", threadId: run.thread_id, runId: run.run_id, action: "interrupt", wait: false }).catch(() => undefined);
        }
      };
    },
  });

  const waitReply = (run: RunRecord, headers: Record<string, string>): Reply => ({
    kind: "deferred",
    contentType: "application/json",
    heartbeatMs: 1_000,
    headers,
    body: hub.waitFor(run.run_id).then((d) => outputOf(run, d)),
  });

  const joinStream = async (
    threadId: string | null,
    runId: string,
    headers: Record<string, string>,
    query: Accepted<typeof joinStreamQuery>,
    filter: AuthFilter | undefined,
  ): Promise<Reply> => {
    if (threadId && !matchesAuthFilter(filter, (await mustThread(threadId)).metadata)) {
      return {
        kind: "sse",
        start: (sink) => void (sink.write(sseSynthetic("error", JSON.stringify({ error: "Error", message: "404: Thread not found" }))), sink.end()),
      };
    }
    const tid = threadId ?? (await storage.runs.threadOf(runId));
    const run = tid ? await storage.runs.get(tid, runId) : undefined;
    const extra = threadId ? undefined : { "content-location": `/runs/${runId}` };
    if (!run || (!threadId && !matchesAuthFilter(filter, (await storage.threads.get(run.thread_id))?.metadata))) {
      // As upstream: a stream that says so (an `error` event on a thread's run; the threadless
      // route ignores it), not a 404 — the SDK's joinStream reads it as a stream event.
      if (!threadId) return { kind: "sse", headers: extra, start: (sink) => void sink.end() };
      return { kind: "sse", start: (sink) => void (sink.write(sseSynthetic("error", JSON.stringify("Run not found"))), sink.end()) };
    }
    const from = lastEventId(headers) ?? "live";
    // Finished and no longer in the hub (before a restart, or forgotten by its retention, which can
    // also happen while observeRun waits for the worker): nothing left to stream.
    const finishedUnseen = (status: RunStatus | undefined) => (status === undefined || isFinal(status)) && !hub.doneOf(runId);
    const ended: Reply = { kind: "sse", headers: extra, start: (sink) => void sink.end() };
    // A gated run whose end the hub still awaits may be final in storage already, its run.done on
    // its way from the worker: it is streamed (its buffered events, then that end), not "unseen".
    const awaited = hub.isAwaitedGated(runId);
    if (!awaited && finishedUnseen(run.status)) return ended;
    await pool.observeRun(run.thread_id, run.run_id, true);
    if (!awaited && finishedUnseen((await storage.runs.get(run.thread_id, runId))?.status)) return ended;
    return streamReply(run, from === -1 ? "start" : from, { withIds: true, cancelOnDisconnect: truthy(query.cancel_on_disconnect), headers: extra });
  };

  const threadParams = { thread_id: "uuid" } as const;
  const runParams = { thread_id: "uuid", run_id: "uuid" } as const;

  return [
    route({
      method: "POST",
      path: "/threads/:thread_id/runs",
      operationId: "create_run",
      summary: "Create a background run",
      tag: TAG,
      params: threadParams,
      body: runCreateSchema,
      handler: async ({ params, body: b, headers, auth }) => {
        const run = await create(b, headers, params.thread_id, auth);
        return json(wireRun(run), 200, { "content-location": location(run, false) });
      },
    }),
    route({
      method: "POST",
      path: "/threads/:thread_id/runs/stream",
      operationId: "stream_run",
      summary: "Create a run and stream its output (SSE)",
      tag: TAG,
      params: threadParams,
      body: runCreateSchema,
      response: { status: 200, contentType: "text/event-stream" },
      handler: async ({ params, body: b, headers, auth }) => {
        const run = await create(b, headers, params.thread_id, auth, "stream");
        return streamReply(run, "start", {
          withIds: true,
          cancelOnDisconnect: b.on_disconnect === "cancel",
          headers: { "content-location": location(run, false) },
        });
      },
    }),
    route({
      method: "POST",
      path: "/threads/:thread_id/runs/wait",
      operationId: "wait_run",
      summary: "Create a run and wait for its final state",
      tag: TAG,
      params: threadParams,
      body: runCreateSchema,
      handler: async ({ params, body: b, headers, auth }) => {
        const run = await create(b, headers, params.thread_id, auth, "wait");
        return waitReply(run, { "content-location": location(run, false) });
      },
    }),
    route({
      method: "POST",
      path: "/runs",
      operationId: "create_stateless_run",
      summary: "Create a stateless background run",
      tag: TAG,
      body: runCreateSchema,
      handler: async ({ body: b, headers, auth }) => {
        const run = await create(b, headers, null, auth);
        return json(wireRun(run), 200, { "content-location": location(run, true) });
      },
    }),
    route({
      method: "POST",
      path: "/runs/stream",
      operationId: "stream_stateless_run",
      summary: "Create a stateless run and stream its output (SSE)",
      tag: TAG,
      body: runCreateSchema,
      response: { status: 200, contentType: "text/event-stream" },
      handler: async ({ body: b, headers, auth }) => {
        const run = await create(b, headers, null, auth, "stream");
        return streamReply(run, "start", {
          withIds: false,
          cancelOnDisconnect: b.on_disconnect === "cancel",
          headers: { "content-location": location(run, true) },
        });
      },
    }),
    route({
      method: "POST",
      path: "/runs/wait",
      operationId: "wait_stateless_run",
      summary: "Create a stateless run and wait for its output",
      tag: TAG,
      body: runCreateSchema,
      handler: async ({ body: b, headers, auth }) => {
        const run = await create(b, headers, null, auth, "wait");
        return waitReply(run, { "content-location": location(run, true) });
      },
    }),
    route({
      method: "POST",
      path: "/runs/batch",
      operationId: "create_stateless_runs_batch",
      summary: "Create several stateless background runs",
      tag: TAG,
      body: arrayOf(runCreateSchema, { minItems: 1 }),
      handler: async ({ body: b, headers, auth }) => {
        const runs = await Promise.all(b.map((rb) => create(rb, headers, null, auth)));
        return json(runs.map(wireRun));
      },
    }),
    route({
      method: "GET",
      path: "/threads/:thread_id/runs",
      operationId: "list_runs",
      summary: "List runs of a thread, oldest first",
      tag: TAG,
      params: threadParams,
      query: body({
        limit: limit(10000, 10),
        offset,
        status: enumOf(["pending", "running", "success", "error", "timeout", "interrupted"]),
        select: runSelectSchema,
      }),
      handler: async ({ params, query: q, auth }) => {
        const filter = await authorize(auth, "threads:search", { thread_id: params.thread_id, status: q.status, limit: q.limit, offset: q.offset });
        const out: ReturnType<typeof wireRun>[] = [];
        if (!matchesAuthFilter(filter, (await mustThread(params.thread_id)).metadata)) return json(out);
        for (const run of await storage.runs.list(params.thread_id, q)) out.push(wireRun(run));
        return json(select(out, q.select));
      },
    }),
    route({
      method: "GET",
      path: "/threads/:thread_id/runs/:run_id",
      operationId: "get_run",
      summary: "Get a run",
      tag: TAG,
      params: runParams,
      handler: async ({ params, auth }) => {
        await mustThread(params.thread_id, await authorize(auth, "threads:read", { thread_id: params.thread_id }));
        return json(wireRun(await mustRun(params.thread_id, params.run_id)));
      },
    }),
    route({
      method: "GET",
      path: "/threads/:thread_id/runs/:run_id/webhook",
      operationId: "get_run_webhook",
      summary: "Get the delivery of a run's webhook (Troupe addition)",
      tag: TAG,
      params: runParams,
      handler: async ({ params, auth }) => {
        await mustThread(params.thread_id, await authorize(auth, "threads:read", { thread_id: params.thread_id }));
        const run = await mustRun(params.thread_id, params.run_id);
        const delivery = await webhookDeliveryOf(storage.webhooks, params.thread_id, params.run_id);
        if (!delivery) {
          throw notFound(
            run.kwargs.webhook
              ? `Run ${run.run_id} has no webhook delivery yet (it has not ended, or webhooks are disabled)`
              : `Run ${run.run_id} has no webhook`,
          );
        }
        return json(delivery);
      },
    }),
    route({
      method: "DELETE",
      path: "/threads/:thread_id/runs/:run_id",
      operationId: "delete_run",
      summary: "Delete a finished run",
      tag: TAG,
      params: runParams,
      handler: async ({ params, auth }) => {
        await mustThread(params.thread_id, await authorize(auth, "threads:delete", { thread_id: params.thread_id, run_id: params.run_id }));
        await pool.request({ type: "run.delete", threadId: params.thread_id, runId: params.run_id });
        hub.drop(params.run_id);
        return empty(204);
      },
    }),
    route({
      method: "POST",
      path: "/threads/:thread_id/runs/:run_id/cancel",
      operationId: "cancel_run",
      summary: "Cancel a pending or running run",
      tag: TAG,
      params: runParams,
      query: body({ wait: str, action: stopAction, reason: str }),
      handler: async ({ params, query: q, auth }) => {
        await mustThread(params.thread_id, await authorize(auth, "threads:update", { thread_id: params.thread_id, action: q.action }));
        const wait = truthy(q.wait);
        await pool.request({ type: "run.cancel", threadId: params.thread_id, runId: params.run_id, action: q.action, wait });
        return empty(wait ? 204 : 202);
      },
    }),
    route({
      method: "POST",
      path: "/runs/cancel",
      operationId: "cancel_runs",
      summary: "Cancel many runs (by thread, ids or status)",
      tag: TAG,
      body: body({ thread_id: uuid, run_ids: arrayOf(uuid), status: enumOf(["pending", "running", "all"]) }),
      query: body({ action: stopAction }),
      handler: async ({ body: q, query, auth }) => {
        if (!q.thread_id && !q.run_ids?.length && !q.status) {
          throw validationError([{ loc: ["body"], msg: "Provide thread_id, run_ids or status", type: "value_error" }]);
        }
        const targets: { threadId: string; runId: string }[] = [];
        const statusOk = (s: RunStatus) => (q.status === undefined || q.status === "all" ? s === "pending" || s === "running" : s === q.status);
        if (q.run_ids?.length) {
          for (const runId of q.run_ids) {
            const threadId = q.thread_id ?? (await storage.runs.threadOf(runId));
            const run = threadId ? await storage.runs.get(threadId, runId) : undefined;
            if (run && statusOk(run.status)) targets.push({ threadId: run.thread_id, runId });
          }
        } else {
          for await (const { threadId, runId, run } of storage.runs.active(q.thread_id)) {
            if (run && statusOk(run.status)) targets.push({ threadId, runId });
          }
        }
        const action = query.action;
        const filter = await authorize(auth, "threads:update", { thread_id: q.thread_id, action });
        const threadsOf = filter ? await Promise.all(targets.map((t) => storage.threads.get(t.threadId))) : [];
        const allowed = filter ? targets.filter((_, i) => matchesAuthFilter(filter, threadsOf[i]?.metadata)) : targets;
        await Promise.all(allowed.map((t) => pool.request({ type: "run.cancel", ...t, action, wait: false }).catch(() => undefined)));
        return empty(204);
      },
    }),
    route({
      method: "GET",
      path: "/threads/:thread_id/runs/:run_id/join",
      operationId: "join_run",
      summary: "Wait for a run to finish and return its final state",
      tag: TAG,
      params: runParams,
      query: body({ cancel_on_disconnect: str }),
      handler: async ({ params, auth }) => {
        await mustThread(params.thread_id, await authorize(auth, "threads:read", { thread_id: params.thread_id }));
        const run = await mustRun(params.thread_id, params.run_id);
        return { kind: "text", status: 200, contentType: "application/json", body: await joinOutput(run) };
      },
    }),
    route({
      method: "GET",
      path: "/threads/:thread_id/runs/:run_id/stream",
      operationId: "join_run_stream",
      summary: "Stream a run's events (Last-Event-ID resumes)",
      tag: TAG,
      params: runParams,
      query: joinStreamQuery,
      response: { status: 200, contentType: "text/event-stream" },
      handler: async ({ params, headers, query, auth }) =>
        joinStream(params.thread_id, params.run_id, headers, query, await authorize(auth, "threads:read", { thread_id: params.thread_id })),
    }),
    route({
      method: "GET",
      path: "/runs/:run_id/stream",
      operationId: "join_stateless_run_stream",
      summary: "Stream a stateless run's events",
      tag: TAG,
      params: { run_id: "uuid" },
      query: joinStreamQuery,
      response: { status: 200, contentType: "text/event-stream" },
      handler: async ({ params, headers, query, auth }) =>
        joinStream(null, params.run_id, headers, query, await authorize(auth, "threads:read", { run_id: params.run_id })),
    }),
  ];
}
