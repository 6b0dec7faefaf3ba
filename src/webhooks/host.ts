// Main-thread handle of the webhook worker: starts workers/webhook.ts, hands actor shards a
// direct port to it, and answers its in-process dispatch requests (relative webhook URLs).
import { MessageChannel, Worker, type MessagePort } from "node:worker_threads";
import { serializeError } from "../errors.ts";
import type { WebhookPayload } from "./payload.ts";
import type { FromWebhookWorker, ToWebhookWorker, WebhookDispatchResultMessage, WebhookWorkerData } from "./protocol.ts";
import type { InProcessDispatch } from "./sender.ts";
import { TSX_REGISTER } from "../util/tsx.ts";

export interface WebhookWorkerHostOptions extends Omit<WebhookWorkerData, "inProcessDispatch"> {
  /** Router entry for relative URLs; without it the worker logs them as undeliverable. */
  dispatch?: InProcessDispatch;
}

const ENTRY = new URL("../../workers/webhook.ts", import.meta.url);

export { TSX_REGISTER };

export class WebhookWorkerHost {
  readonly worker: Worker;

  constructor(opts: WebhookWorkerHostOptions) {
    const { dispatch, ...rest } = opts;
    const workerData: WebhookWorkerData = { ...rest, headers: { ...rest.headers }, inProcessDispatch: !!dispatch };
    this.worker = new Worker(ENTRY, { execArgv: ["--import", TSX_REGISTER], workerData });
    this.worker.on("error", (err) => console.error(`[troupe webhook] worker failed: ${err.message}`));
    if (dispatch) {
      this.worker.on("message", (msg: FromWebhookWorker) => {
        if (msg?.type === "webhook.dispatch") void this.answer(msg, dispatch);
      });
    }
  }

  /** A new channel to the worker; give the returned port to one actor shard (transfer it). */
  connectPort(): MessagePort {
    const { port1, port2 } = new MessageChannel();
    const msg: ToWebhookWorker = { type: "webhook.port", port: port1 };
    this.worker.postMessage(msg, [port1]);
    return port2;
  }

  send(url: string, payload: WebhookPayload): void {
    const msg: ToWebhookWorker = { type: "webhook.send", url, payload };
    this.worker.postMessage(msg);
  }

  /** Keeps the process from waiting on the worker (it has no work that must outlive the server). */
  unref(): this {
    this.worker.unref();
    return this;
  }

  async terminate(): Promise<void> {
    await this.worker.terminate();
  }

  private async answer(req: Extract<FromWebhookWorker, { type: "webhook.dispatch" }>, dispatch: InProcessDispatch): Promise<void> {
    let reply: WebhookDispatchResultMessage;
    try {
      const r = await dispatch(req.method, req.path, req.headers, req.body);
      reply = { type: "webhook.dispatch.result", id: req.id, status: r.status, headers: r.headers };
    } catch (err) {
      reply = { type: "webhook.dispatch.result", id: req.id, error: serializeError(err) };
    }
    try {
      this.worker.postMessage(reply);
    } catch {
      // worker already gone
    }
  }
}
