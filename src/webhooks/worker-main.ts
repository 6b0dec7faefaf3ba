// Body of the webhook worker thread (workers/webhook.ts is only its entry): takes on every delivery
// waiting in the outbox, then each one a shard announces (`webhook.due`), through one OutboxDeliverer.
import type { MessagePort } from "node:worker_threads";
import { deserializeError } from "../errors.ts";
import { openStorage } from "../storage/open.ts";
import { WebhookCounters } from "./counters.ts";
import { componentLog, configureLogging } from "../log/logger.ts";
import { OutboxDeliverer } from "./deliverer.ts";
import { BoundedRunner } from "./limiter.ts";
import type { FromWebhookWorker, ToWebhookWorker, WebhookDispatchResultMessage, WebhookWorkerData } from "./messages.ts";
import { isToWebhookWorker } from "./messages.ts";
import { WebhookSender, type InProcessDispatch } from "./sender.ts";
import { DeliverySigner } from "./signing.ts";

export interface WebhookWorkerOptions {
  log?: (message: string) => void;
}

export interface WebhookWorkerHandle {
  readonly deliverer: OutboxDeliverer;
  /** Stops listening, aborts attempts in progress (the outbox keeps them), closes the storage. */
  close(): Promise<void>;
}

const DEFAULT_MAX_IN_FLIGHT = 64;

export async function runWebhookWorker(parent: MessagePort, data: WebhookWorkerData, opts: WebhookWorkerOptions = {}): Promise<WebhookWorkerHandle> {
  if (data.log) configureLogging(data.log, "webhook");
  const webhookLog = componentLog("webhook");
  const log = opts.log ?? ((m: string) => webhookLog.warn(m));
  const pending = new Map<number, { resolve: (r: WebhookDispatchResultMessage) => void; timer: NodeJS.Timeout }>();
  let nextId = 1;

  const dispatch: InProcessDispatch = (method, path, headers, body) =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      // the sender stops waiting at requestTimeoutMs; this only frees the slot if the parent never answers
      const timer = setTimeout(
        () => {
          pending.delete(id);
          reject(new Error("no answer from the server's router"));
        },
        (data.requestTimeoutMs ?? 30_000) + 1_000,
      );
      pending.set(id, {
        timer,
        resolve: (r) => (r.error ? reject(deserializeError(r.error)) : resolve({ status: r.status ?? 0, headers: r.headers })),
      });
      const req: FromWebhookWorker = { type: "webhook.dispatch", id, method, path, headers, body };
      parent.postMessage(req);
    });

  const storage = await openStorage({ dataDir: data.dataDir, databaseUri: data.databaseUri, syncCommits: data.syncCommits, nodeId: data.nodeId }); // (messages wait in the port until the listener below)
  const sender = new WebhookSender({
    headers: data.headers,
    connectTimeoutMs: data.connectTimeoutMs,
    requestTimeoutMs: data.requestTimeoutMs,
    dispatch: data.inProcessDispatch ? dispatch : undefined,
    addressRule: data.urlPolicy ?? undefined, // the addresses names resolve to, checked at connect time
  });
  const deliverer = new OutboxDeliverer({
    storage,
    sender,
    signer: new DeliverySigner(data.signingSecret ?? null),
    // a delivery waiting for a slot is only its key: the queue needs no bound
    runner: new BoundedRunner(data.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT, Number.POSITIVE_INFINITY),
    counters: new WebhookCounters(data.counters),
    urlPolicy: data.urlPolicy ?? null,
    retryDelaysMs: data.retryDelaysMs,
    log,
  });
  const ports = new Set<MessagePort>();

  const onMessage = (msg: unknown): void => {
    if (!isToWebhookWorker(msg)) {
      log(`ignored a malformed message: ${describe(msg)}`);
      return;
    }
    handle(msg);
  };

  const handle = (msg: ToWebhookWorker): void => {
    switch (msg.type) {
      case "webhook.port":
        ports.add(msg.port);
        msg.port.on("message", onMessage);
        msg.port.once("close", () => ports.delete(msg.port));
        return;
      case "webhook.dispatch.result": {
        const p = pending.get(msg.id);
        if (!p) return;
        pending.delete(msg.id);
        clearTimeout(p.timer);
        p.resolve(msg);
        return;
      }
      case "webhook.due":
        deliverer.due([msg.threadId, msg.runId], msg.at === undefined ? undefined : Date.parse(msg.at));
        return;
    }
  };

  void deliverer.loadOutbox().then(
    (waiting) => waiting > 0 && log(`${waiting} webhook deliveries waiting in the outbox`),
    (err: unknown) => log(`reading the webhook outbox failed: ${(err as Error).message}`),
  );
  parent.on("message", onMessage);
  return {
    deliverer,
    async close() {
      parent.off("message", onMessage);
      for (const p of ports) p.close();
      ports.clear();
      deliverer.close();
      sender.close();
      await storage.close();
    },
  };
}

function describe(msg: unknown): string {
  const type = msg && typeof msg === "object" ? (msg as { type?: unknown }).type : undefined;
  return typeof type === "string" ? `type ${JSON.stringify(type)}` : typeof msg;
}
