// Streams an API key opened (SSE replies, WebSockets) end when the key stops verifying: keys with
// open streams are re-read every `intervalMs`; a failing key's SSE streams get an error event and
// end, its WebSockets close with 4401. The timer runs only while streams are open.
import type { Reply, SseReply, WebSocketReply } from "./types.ts";

const REVOKED_SSE = `event: error\ndata: ${JSON.stringify({ error: "Unauthorized", message: "API key revoked" })}\n\n`;
/** 4000 + HTTP status, as the SDK reads refusals. */
const REVOKED_WS_CODE = 4401;

export class KeyedStreams {
  private readonly byKey = new Map<string, Set<() => void>>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    /** is the key still good (for this deployment)? Called with fresh reads, not the request cache */
    private readonly stillValid: (key: string) => boolean,
    private readonly intervalMs: number,
  ) {}

  /** The reply, with its stream (if it is one) tied to `key`. */
  watch(key: string, reply: Reply): Reply {
    if (reply.kind === "sse") return this.watchSse(key, reply);
    if (reply.kind === "websocket") return this.watchWebSocket(key, reply);
    return reply;
  }

  /** Open streams (for tests and diagnostics). */
  get size(): number {
    let n = 0;
    for (const s of this.byKey.values()) n += s.size;
    return n;
  }

  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.byKey.clear();
  }

  /** Re-checks every key with open streams now; ends the streams of keys that fail. */
  sweep(): void {
    for (const [key, closers] of [...this.byKey]) {
      if (this.stillValid(key)) continue;
      this.byKey.delete(key);
      for (const close of [...closers]) close();
    }
    if (this.byKey.size === 0) this.stopTimer();
  }

  private add(key: string, close: () => void): () => void {
    let set = this.byKey.get(key);
    if (!set) this.byKey.set(key, (set = new Set()));
    set.add(close);
    this.timer ??= setInterval(() => this.sweep(), this.intervalMs).unref();
    return () => {
      const s = this.byKey.get(key);
      if (!s?.delete(close) || s.size > 0) return;
      this.byKey.delete(key);
      if (this.byKey.size === 0) this.stopTimer();
    };
  }

  private stopTimer(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private watchSse(key: string, reply: SseReply): SseReply {
    return {
      ...reply,
      start: (sink) => {
        let ended = false;
        let cleanup: (() => void) | void = undefined;
        const remove = this.add(key, () => {
          if (ended) return;
          ended = true;
          cleanup?.(); // as if the client went away: unsubscribe (and cancel when the request asked for it)
          sink.write(REVOKED_SSE);
          sink.end();
        });
        cleanup = reply.start({
          write: (frame) => sink.write(frame),
          end: () => {
            if (!ended) {
              ended = true;
              remove();
            }
            sink.end();
          },
        });
        return () => {
          if (ended) return;
          ended = true;
          remove();
          cleanup?.();
        };
      },
    };
  }

  private watchWebSocket(key: string, reply: WebSocketReply): WebSocketReply {
    return {
      ...reply,
      open: (conn) => {
        let revoked = false;
        const session = reply.open(conn);
        const remove = this.add(key, () => {
          revoked = true;
          conn.close(REVOKED_WS_CODE, "API key revoked");
        });
        return {
          onMessage: (text) => {
            if (!revoked) session.onMessage(text);
          },
          onClose: () => {
            remove();
            session.onClose();
          },
        };
      },
    };
  }
}
