// Streams open right now (SSE replies, accepted WebSockets), for the stream-subscriber gauge: a
// stream reply is wrapped once when it is dispatched, so counting costs nothing per event.
import type { Reply, SseReply, WebSocketReply } from "../http/types.ts";

export class OpenStreams {
  sse = 0;
  websocket = 0;

  /** Counts the reply's stream while it is open (no-op for other replies). */
  track(reply: Reply): void {
    if (reply.kind === "sse") this.trackSse(reply);
    else if (reply.kind === "websocket") this.trackWebSocket(reply);
  }

  private trackSse(reply: SseReply): void {
    const start = reply.start;
    reply.start = (sink) => {
      this.sse++;
      let open = true;
      const closed = () => {
        if (!open) return;
        open = false;
        this.sse--;
      };
      const cleanup = start({
        write: (frame) => sink.write(frame),
        end: () => {
          closed();
          sink.end();
        },
      });
      return () => {
        closed();
        cleanup?.();
      };
    };
  }

  private trackWebSocket(reply: WebSocketReply): void {
    const open = reply.open;
    reply.open = (conn) => {
      const session = open(conn);
      this.websocket++;
      let counted = true;
      const onClose = session.onClose;
      session.onClose = () => {
        if (counted) {
          counted = false;
          this.websocket--;
        }
        onClose.call(session);
      };
      return session;
    };
  }
}
