// GET /threads/{t}/stream (SDK `threads.joinStream`): one long-lived SSE stream with every run of a
// thread, run starts/ends and state updates, as published to the run hub's thread streams.
// Semantics and event shapes: docs/THREAD_STREAM.md.
import { threadNotFound } from "../errors.ts";
import { matchesAuthFilter } from "../auth/index.ts";
import { THREAD_STREAM_MODES, type ThreadStreamMode } from "../hub/thread-stream-hub.ts";
import type { RemoteThreadStream } from "../hub/remote-threads.ts";
import { route, type RouteDef, type SseReply } from "../http/types.ts";
import { arrayOf, body, enumOf, withDefault } from "../http/schemas/common.ts";
import type { AppContext } from "../server/context.ts";
import { lastEventId, sseFrame } from "../http/sse-frames.ts";

/** `: heartbeat` comment interval: keeps proxies from closing an idle stream; the SDK arms its idle watchdog on it */
const HEARTBEAT_MS = 5_000;

const streamModeQuery = body({
  // one value or a repeated key (the SDK sends an array as stream_mode=a&stream_mode=b)
  stream_mode: withDefault(arrayOf(enumOf(THREAD_STREAM_MODES), { minItems: 1 }), ["run_modes"]),
});

export function threadStreamRoutes(app: AppContext): RouteDef[] {
  const { storage } = app;
  const streams = app.pool.threadStreams;

  const reply = (threadId: string, modes: ReadonlySet<ThreadStreamMode>, after: number | undefined, query: string): SseReply => ({
    kind: "sse",
    // the SDK reconnects to Location with Last-Event-ID when the connection drops
    headers: { location: `/threads/${threadId}/stream${query ? `?${query}` : ""}` },
    heartbeatMs: HEARTBEAT_MS,
    start(sink) {
      let done = false;
      const stop = () => {
        done = true;
        unsubscribe();
      };
      // runs in flight whose events wait in their worker (background, /wait): go live from now on
      for (const runId of app.pool.runs.gatedRunsOf(threadId)) void app.pool.observeRun(threadId, runId, false).catch(() => undefined);
      const unsubscribe = streams.subscribe(threadId, after, {
        modes,
        onEvent: (e) => void sink.write(sseFrame(e, true)),
        onClose: () => {
          stop();
          sink.end();
        },
      });
      return () => {
        if (!done) stop();
      };
    },
  });

  const servedReply = (threadId: string, stream: RemoteThreadStream, query: string): SseReply => ({
    kind: "sse",
    headers: { location: `/threads/${threadId}/stream${query ? `?${query}` : ""}` },
    heartbeatMs: HEARTBEAT_MS,
    start: (sink) =>
      stream.open(
        (e) => void sink.write(sseFrame(e, true)),
        () => sink.end(),
      ),
  });

  return [
    route({
      method: "GET",
      path: "/threads/:thread_id/stream",
      operationId: "join_thread_stream",
      summary: "Stream a thread: every run's events, run starts/ends, state updates (SSE; Last-Event-ID resumes)",
      tag: "threads",
      params: { thread_id: "uuid" },
      query: streamModeQuery,
      response: { status: 200, contentType: "text/event-stream" },
      handler: async ({ params, query, rawQuery, headers, auth }) => {
        const threadId = params.thread_id;
        const filter = await app.auth?.authorize(auth, "threads:read", { thread_id: threadId });
        const t = await storage.threads.get(threadId);
        if (!t || !matchesAuthFilter(filter, t.metadata)) throw threadNotFound(threadId);
        const modes = new Set(query.stream_mode);
        const after = lastEventId(headers);
        // cluster: an id another node gave out (the reconnect came here) is resumed by that node
        const elsewhere = after !== undefined && after >= 0 ? await app.pool.threadStreamFrom(threadId, after, modes) : undefined;
        if (elsewhere) return servedReply(threadId, elsewhere, rawQuery.toString());
        await app.pool.watchThread(threadId); // cluster: the thread's runs on other nodes reach this one from now on
        return reply(threadId, modes, after, rawQuery.toString());
      },
    }),
  ];
}
