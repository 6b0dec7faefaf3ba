// Entry of a schema-extraction worker thread; all logic lives in src/schemas/extract-worker.ts.
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import type { ExtractWorkerData } from "../src/schemas/messages.ts";
import { runSchemaExtraction } from "../src/schemas/extract-worker.ts";

if (isMainThread || !parentPort) throw new Error("workers/schema-extract.ts is a worker entry point; it must not be loaded on the main thread");

void runSchemaExtraction(parentPort, workerData as ExtractWorkerData);
