// What the HTTP thread records about every request once its reply is decided: the route cells of
// /metrics, open streams, the request log. The Dispatcher's observer (src/http/dispatch.ts).
import type { RawRequest, RequestObserver } from "../http/dispatch.ts";
import type { Reply } from "../http/types.ts";
import { RequestLog } from "../log/request-log.ts";
import { HttpRequestMetrics } from "./http-requests.ts";
import { OpenStreams } from "./open-streams.ts";

export class RequestTelemetry implements RequestObserver {
  readonly http = new HttpRequestMetrics();
  readonly streams = new OpenStreams();
  readonly log: RequestLog;

  /** `requestLinesPerSecond`: the request log's budget of individual lines */
  constructor(requestLinesPerSecond: number) {
    this.log = new RequestLog(requestLinesPerSecond);
  }

  answered(req: RawRequest, requestId: string, route: string, status: number, durationMs: number, nowMs: number, reply: Reply): void {
    this.http.observe(req.method, route, status, durationMs / 1000);
    if (reply.kind === "sse" || reply.kind === "websocket") this.streams.track(reply);
    this.log.record(requestId, req.method, route, req.path, status, durationMs, nowMs);
  }
}
