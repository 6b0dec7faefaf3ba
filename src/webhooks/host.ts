// Main-thread handle of the webhook worker: starts workers/webhook.ts (lazily: a V8 isolate costs
// ~25 MB of RSS), hands actor shards a direct port to it, and answers its in-process dispatch
// requests (relative webhook URLs).
import { MessageChannel, Worker, type MessagePort } from "node:worker_threads";
import { serializeError } from "../errors.ts";
import { WebhookCounters } from "./counters.ts";
import { componentLog } from "../log/logger.ts";
import type { FromWebhookWorker, ToWebhookWorker, WebhookDispatchResultMessage, WebhookWorkerData } from "./messages.ts";
import type { InProcessDispatch } from "./sender.ts";

export interface WebhookWorkerHostOptions extends Omit<WebhookWorkerData, "inProcessDispatch" | "counters"> {
  /** URL of the compiled worker entry, workers/webhook.ts (src/loader/runtime-modules.ts) */
  entryUrl: string;
  /** Router entry for relative URLs; without it their attempts fail. */
  dispatch?: InProcessDispatch;
}

/*
 * The worker thread starts on `start()` (the server calls it at startup when the outbox holds
 * deliveries), or when a shard first posts on a port from `connectPort()`. Until then the main
 * thread holds the worker's end of each shard channel (unref'd, listening); the first message starts the worker, is forwarded to it, and the
 * port itself is transferred to the worker, so every later message goes shard → worker directly.
 * Removing the port's last 'message' listener stops it, so messages queued behind the first one
 * stay in the port and move with it (none is lost or handled twice).
 */
export class WebhookWorkerHost {
  private worker: Worker | null = null;
  /** worker ends of shard channels not handed over yet, with the listener that starts the worker */
  private readonly waiting = new Map<MessagePort, (msg: unknown) => void>();
  private unrefd = false;
  private terminated = false;
  /** delivery counts, counted by the worker (shared memory: readable while it runs) */
  readonly counters = new WebhookCounters();

  constructor(private readonly opts: WebhookWorkerHostOptions) {}

  /** Whether the worker thread has been started. */
  get started(): boolean {
    return this.worker !== null;
  }

  /** Starts the worker thread now (idempotent) and hands it every shard port held so far. */
  start(): Worker {
    if (this.worker) return this.worker;
    if (this.terminated) throw new Error("webhook worker host was terminated");
    const { dispatch, entryUrl, ...rest } = this.opts;
    const workerData: WebhookWorkerData = { ...rest, headers: { ...rest.headers }, inProcessDispatch: !!dispatch, counters: this.counters.buffer };
    const worker = new Worker(new URL(entryUrl), { execArgv: ["--enable-source-maps"], workerData });
    this.worker = worker;
    worker.on("error", (err) => componentLog("webhook").error("webhook worker failed", { err }));
    if (dispatch) {
      worker.on("message", (msg: FromWebhookWorker) => {
        if (msg?.type === "webhook.dispatch") void this.answer(worker, msg, dispatch);
      });
    }
    if (this.unrefd) worker.unref();
    for (const port of [...this.waiting.keys()]) this.handOver(worker, port);
    return worker;
  }

  /** Deliveries this node took over (from a dead node's outbox rows): the worker makes them at their due times. */
  take(deliveries: readonly { threadId: string; runId: string; nextAttemptAt: string }[]): void {
    if (deliveries.length === 0 || this.terminated) return;
    const worker = this.start();
    for (const d of deliveries) {
      const msg: ToWebhookWorker = { type: "webhook.due", threadId: d.threadId, runId: d.runId, at: d.nextAttemptAt };
      worker.postMessage(msg);
    }
  }

  /** A new channel to the worker; give the returned port to one actor shard (transfer it). */
  connectPort(): MessagePort {
    const { port1, port2 } = new MessageChannel();
    if (this.worker) {
      this.handOver(this.worker, port1);
      return port2;
    }
    const onFirst = (msg: unknown) => {
      this.release(port1);
      const worker = this.start();
      worker.postMessage(msg); // the parent port accepts the same messages as a shard port
      this.handOver(worker, port1);
    };
    this.waiting.set(port1, onFirst);
    port1.on("message", onFirst);
    port1.once("close", () => this.waiting.delete(port1)); // its shard is gone
    port1.unref(); // like the worker, a port waiting for webhooks must not keep the process alive
    return port2;
  }

  /** Keeps the process from waiting on the worker (it has no work that must outlive the server). */
  unref(): this {
    this.unrefd = true;
    this.worker?.unref();
    return this;
  }

  async terminate(): Promise<void> {
    this.terminated = true;
    for (const port of [...this.waiting.keys()]) {
      this.release(port);
      port.close();
    }
    await this.worker?.terminate();
  }

  /** Stops listening on a held port (messages after this one stay queued in it). */
  private release(port: MessagePort): void {
    const listener = this.waiting.get(port);
    if (!listener) return;
    this.waiting.delete(port);
    port.off("message", listener);
  }

  private handOver(worker: Worker, port: MessagePort): void {
    this.release(port);
    const msg: ToWebhookWorker = { type: "webhook.port", port };
    worker.postMessage(msg, [port]);
  }

  private async answer(worker: Worker, req: Extract<FromWebhookWorker, { type: "webhook.dispatch" }>, dispatch: InProcessDispatch): Promise<void> {
    let reply: WebhookDispatchResultMessage;
    try {
      const r = await dispatch(req.method, req.path, req.headers, req.body);
      reply = { type: "webhook.dispatch.result", id: req.id, status: r.status, headers: r.headers };
    } catch (err) {
      reply = { type: "webhook.dispatch.result", id: req.id, error: serializeError(err) };
    }
    try {
      worker.postMessage(reply);
    } catch {
      // worker already gone
    }
  }
}
