// Body of the webhook worker thread (workers/webhook.ts is only its entry): accepts `webhook.send`
// from the parent and from actor-shard ports, and delivers concurrently through one WebhookSender.
import type { MessagePort } from "node:worker_threads";
import { deserializeError } from "../errors.ts";
import { BoundedRunner } from "./limiter.ts";
import type { FromWebhookWorker, ToWebhookWorker, WebhookDispatchResultMessage, WebhookWorkerData } from "./messages.ts";
import { isToWebhookWorker } from "./messages.ts";
import { WebhookSender, type DeliveryResult, type InProcessDispatch } from "./sender.ts";
import { urlForLog, validateWebhookUrl } from "./url-policy.ts";

export interface WebhookWorkerOptions {
  log?: (message: string) => void;
  /** Called after every delivery attempt sequence (tests, metrics). */
  onDelivered?: (url: string, result: DeliveryResult) => void;
}

export interface WebhookWorkerHandle {
  readonly sender: WebhookSender;
  /** Resolves once no delivery is running or queued. */
  idle(): Promise<void>;
  /** Stops listening, aborts deliveries in progress. */
  close(): void;
}

const DEFAULT_MAX_IN_FLIGHT = 64;
const DEFAULT_MAX_QUEUED = 10_000;

export function runWebhookWorker(parent: MessagePort, data: WebhookWorkerData, opts: WebhookWorkerOptions = {}): WebhookWorkerHandle {
  const log = opts.log ?? ((m: string) => console.warn(`[troupe webhook] ${m}`));
  const pending = new Map<number, { resolve: (r: WebhookDispatchResultMessage) => void; timer: NodeJS.Timeout }>();
  let nextId = 1;

  const dispatch: InProcessDispatch = (method, path, headers, body) =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      // the sender stops waiting at requestTimeoutMs; this only frees the slot if the parent never answers
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error("no answer from the server's router"));
      }, (data.requestTimeoutMs ?? 30_000) + 1_000);
      pending.set(id, {
        timer,
        resolve: (r) => (r.error ? reject(deserializeError(r.error)) : resolve({ status: r.status ?? 0, headers: r.headers })),
      });
      const req: FromWebhookWorker = { type: "webhook.dispatch", id, method, path, headers, body };
      parent.postMessage(req);
    });

  const sender = new WebhookSender({
    headers: data.headers,
    connectTimeoutMs: data.connectTimeoutMs,
    requestTimeoutMs: data.requestTimeoutMs,
    maxAttempts: data.maxAttempts,
    backoffBaseMs: data.backoffBaseMs,
    maxRetryAfterMs: data.maxRetryAfterMs,
    dispatch: data.inProcessDispatch ? dispatch : undefined,
    addressRule: data.urlPolicy ?? undefined, // the addresses names resolve to, checked at connect time
    log,
  });
  const runner = new BoundedRunner(data.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT, data.maxQueued ?? DEFAULT_MAX_QUEUED);
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
      case "webhook.send": {
        const { url, payload } = msg;
        const reason = data.urlPolicy ? validateWebhookUrl(url, data.urlPolicy) : null;
        if (reason) {
          log(`webhook ${urlForLog(url)} for run ${payload.run_id} not sent: ${reason}`);
          return;
        }
        const accepted = runner.run(async () => {
          const result = await sender.send(url, payload);
          opts.onDelivered?.(url, result);
        });
        if (!accepted) log(`webhook for run ${payload.run_id} dropped: ${runner.queued} deliveries already waiting`);
        return;
      }
    }
  };

  parent.on("message", onMessage);
  return {
    sender,
    idle: () => runner.idle(),
    close() {
      parent.off("message", onMessage);
      for (const p of ports) p.close();
      ports.clear();
      sender.close();
    },
  };
}

function describe(msg: unknown): string {
  const type = msg && typeof msg === "object" ? (msg as { type?: unknown }).type : undefined;
  return typeof type === "string" ? `type ${JSON.stringify(type)}` : typeof msg;
}
