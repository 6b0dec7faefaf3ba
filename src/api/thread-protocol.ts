// The thread-centric protocol (reference §13; SDK `client.threads.stream(...)`, useStream v2,
// RemoteGraph.streamEvents v3). Semantics: docs/THREAD_PROTOCOL.md.
//   POST /threads/{t}/commands       one command → one JSON envelope
//   POST /threads/{t}/stream/events  one filtered SSE subscription (replays the session, then live)
//   GET  /threads/{t}/stream/events  WebSocket: commands and subscription.* in, responses and events out
import { threadNotFound } from "../errors.ts";
import { matchesAuthFilter } from "../auth/index.ts";
import type { ProtocolFilter, ProtocolFrame } from "../hub/thread-protocol-hub.ts";
import { json, route, type AuthInfo, type RouteDef, type SseReply, type WebSocketReply, type WsConnection } from "../http/types.ts";
import type { AppContext } from "../server/context.ts";
import { checkParams, ProtocolCommandError, ThreadCommands, type ProtocolCommand, type ProtocolResponse } from "./thread-protocol/commands.ts";
import { commandSchema, eventStreamRequestSchema } from "./thread-protocol/schemas.ts";
import { compileBody } from "../http/validation.ts";
import { upgradeRequired } from "../http/errors.ts";
import { sseFrame } from "../http/sse-frames.ts";

const TAG = "threads";
/** `: heartbeat` comment interval: the SDK's idle watchdog arms itself on heartbeats */
const HEARTBEAT_MS = 5_000;

function toFilter(body: { channels: string[]; namespaces?: string[][]; depth?: number }): ProtocolFilter {
  return { channels: body.channels, ...(body.namespaces ? { namespaces: body.namespaces } : {}), ...(body.depth !== undefined ? { depth: body.depth } : {}) };
}

export function threadProtocolRoutes(app: AppContext): RouteDef[] {
  const hub = app.pool.sessions;
  const commands = new ThreadCommands(app);

  /**
   * 404 when the thread is hidden by the auth filter, or missing unless `missingOk` (a WebSocket
   * opens before its first run.start creates the thread; an SSE stream is opened after it).
   */
  const mustReadThread = async (threadId: string, auth: AuthInfo | undefined, missingOk = false) => {
    const filter = await app.auth?.authorize(auth, "threads:read", { thread_id: threadId });
    const t = await app.storage.threads.get(threadId);
    if (t ? !matchesAuthFilter(filter, t.metadata) : !missingOk) throw threadNotFound(threadId);
  };

  const sseReply = (threadId: string, filter: ProtocolFilter, since: number | undefined): SseReply => ({
    kind: "sse",
    heartbeatMs: HEARTBEAT_MS,
    start(sink) {
      const { unsubscribe } = hub.subscribe(threadId, since, {
        filter,
        onEvent: (f) => void sink.write(sseFrame({ id: f.seq, event: f.method, data: f.data }, true)),
        onClose: () => sink.end(), // the hub already forgot this listener
      });
      return unsubscribe;
    },
  });

  const webSocketReply = (threadId: string, headers: Record<string, string>, auth: AuthInfo | undefined): WebSocketReply => ({
    kind: "websocket",
    open: (conn) => new ProtocolSocket(conn, threadId, commands, app, { headers, auth }),
  });

  return [
    route({
      method: "POST",
      path: "/threads/:thread_id/commands",
      operationId: "thread_protocol_command",
      summary: "Thread-centric protocol: run one command (run.start, input.respond, state.get, state.listCheckpoints, state.fork, agent.getTree)",
      tag: TAG,
      params: { thread_id: "uuid" },
      body: commandSchema,
      handler: async ({ params, body, headers, auth }) => json(await commands.execute(body, { threadId: params.thread_id, headers, auth })),
    }),
    route({
      method: "POST",
      path: "/threads/:thread_id/stream/events",
      operationId: "thread_protocol_events",
      summary: "Thread-centric protocol: a filtered SSE event stream of the thread's current run (replayed, then live)",
      tag: TAG,
      params: { thread_id: "uuid" },
      body: eventStreamRequestSchema,
      response: { status: 200, contentType: "text/event-stream" },
      handler: async ({ params, body, auth }) => {
        await mustReadThread(params.thread_id, auth);
        await app.pool.watchThread(params.thread_id); // cluster: the session of the node running the thread's run reaches this one
        return sseReply(params.thread_id, toFilter(body), body.since);
      },
    }),
    route({
      method: "GET",
      path: "/threads/:thread_id/stream/events",
      operationId: "thread_protocol_socket",
      summary: "Thread-centric protocol over a WebSocket (upgrade): commands and subscription.subscribe/unsubscribe in, responses and events out",
      tag: TAG,
      params: { thread_id: "uuid" },
      handler: async ({ params, headers, auth }) => {
        if (headers.upgrade?.toLowerCase() !== "websocket") {
          throw upgradeRequired("GET /threads/{thread_id}/stream/events is a WebSocket endpoint: send an upgrade request, or POST a filter for SSE");
        }
        await mustReadThread(params.thread_id, auth, true);
        return webSocketReply(params.thread_id, headers, auth);
      },
    }),
  ];
}

/**
 * One WebSocket connection: commands answered in order of arrival, subscriptions held until
 * unsubscribed or the socket closes. An event matching several subscriptions is sent once; a new
 * subscription gets the session's held events replayed (the SDK dedups by event_id).
 */
class ProtocolSocket {
  private readonly subscriptions = new Map<string, () => void>();
  private nextSubscription = 1;
  private lastSentSeq = -1;
  private closed = false;
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly conn: WsConnection,
    private readonly threadId: string,
    private readonly commands: ThreadCommands,
    private readonly app: AppContext,
    private readonly ctx: { headers: Record<string, string>; auth?: AuthInfo },
  ) {}

  onMessage(text: string): void {
    // answered in arrival order (a subscribe sent right after run.start sees that run's session)
    this.queue = this.queue.then(() => this.handle(text)).catch(() => undefined);
  }

  onClose(): void {
    this.closed = true;
    for (const unsubscribe of this.subscriptions.values()) unsubscribe();
    this.subscriptions.clear();
  }

  private send(value: unknown): void {
    if (!this.closed) this.conn.send(typeof value === "string" ? value : JSON.stringify(value));
  }

  private sendFrame(f: ProtocolFrame): void {
    if (f.seq === this.lastSentSeq) return; // the same event, matched by another subscription
    this.lastSentSeq = f.seq;
    this.send(f.data);
  }

  private async handle(text: string): Promise<void> {
    if (this.closed) return; // queued behind a slow command when the socket closed: nothing to answer, nothing to subscribe
    let cmd: unknown;
    try {
      cmd = JSON.parse(text);
    } catch {
      return this.send({ type: "error", id: null, error: "invalid_argument", message: "A command must be a JSON object {id, method, params}" });
    }
    const issues = checkEnvelope(cmd);
    if (issues) {
      const id = (cmd as { id?: unknown } | null)?.id;
      return this.send({ type: "error", id: Number.isInteger(id) && (id as number) >= 0 ? id : null, error: "invalid_argument", message: issues });
    }
    const command = cmd as ProtocolCommand;
    if (command.method === "subscription.subscribe" || command.method === "subscription.unsubscribe") {
      try {
        checkParams(command.method, command.params ?? {});
      } catch (err) {
        return this.send({ type: "error", id: command.id, error: (err as ProtocolCommandError).code, message: (err as Error).message });
      }
      if (command.method === "subscription.unsubscribe") return this.unsubscribe(command);
      try {
        await this.app.pool.watchThread(this.threadId);
      } catch {
        return this.send({
          type: "error",
          id: command.id,
          error: "unknown_error",
          message: "The thread's events on other nodes cannot be followed now; retry",
        });
      }
      if (this.closed) return;
      return this.subscribe(command);
    }
    const response: ProtocolResponse = await this.commands.execute(command, { threadId: this.threadId, ...this.ctx });
    this.send(response);
  }

  private subscribe(cmd: ProtocolCommand): void {
    const p = cmd.params ?? {};
    const id = `sub-${this.nextSubscription++}`;
    const filter = toFilter(p as { channels: string[]; namespaces?: string[][]; depth?: number });
    const hub = this.app.pool.sessions;
    // replayed events go out before the reply: the SDK routes them to the subscription it registered
    // under a placeholder id while the command was in flight
    const replay: ProtocolFrame[] = [];
    let live = false;
    const { unsubscribe, replayed } = hub.subscribe(this.threadId, undefined, {
      filter,
      onEvent: (f) => (live ? this.sendFrame(f) : replay.push(f)),
      onClose: () => this.conn.close(4404, `Thread ${this.threadId} was deleted`),
    });
    for (const f of replay) this.send(f.data);
    if (replay.length) this.lastSentSeq = Math.max(this.lastSentSeq, replay[replay.length - 1].seq);
    live = true;
    this.subscriptions.set(id, unsubscribe);
    this.send({ type: "success", id: cmd.id, result: { subscription_id: id, replayed_events: replayed }, meta: { thread_id: this.threadId } });
  }

  private unsubscribe(cmd: ProtocolCommand): void {
    const id = (cmd.params as { subscription_id: string }).subscription_id;
    const unsubscribe = this.subscriptions.get(id);
    if (!unsubscribe)
      return this.send({ type: "error", id: cmd.id, error: "no_such_subscription", message: `No subscription ${String(id)} on this connection` });
    unsubscribe();
    this.subscriptions.delete(id);
    this.send({ type: "success", id: cmd.id, result: {}, meta: { thread_id: this.threadId } });
  }
}

const envelopeValidator = compileBody(commandSchema, "command");

/** What is wrong with a WebSocket frame's command envelope (the HTTP route's body schema), if anything. */
function checkEnvelope(cmd: unknown): string | undefined {
  const issues = envelopeValidator(cmd);
  return issues?.length ? issues.map((i) => `${i.loc.join(".")}: ${i.msg}`).join("; ") : undefined;
}
