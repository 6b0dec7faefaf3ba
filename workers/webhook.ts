// Entry of the dedicated webhook worker thread; all logic lives in src/webhooks/worker-main.ts.
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import type { WebhookWorkerData } from "../src/webhooks/messages.ts";
import { runWebhookWorker } from "../src/webhooks/worker-main.ts";

if (isMainThread || !parentPort) throw new Error("workers/webhook.ts is a worker entry point; it must not be loaded on the main thread");

void runWebhookWorker(parentPort, workerData as WebhookWorkerData);
