// Thread entry for one client worker: rebuilds the loop from its spec, runs its share of the
// virtual users with its own sockets, and posts the raw samples back.
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import { createClient } from "../http/create-client.ts";
import { buildIteration } from "./loops.ts";
import { runClosedLoop } from "./closed-loop.ts";
import type { StartMessage, WorkerInput, WorkerMessage } from "./worker-messages.ts";

if (isMainThread || parentPort === null) throw new Error("bench/load/client-worker.ts must run in a worker thread");
const port = parentPort;
const input = workerData as WorkerInput;

function post(msg: WorkerMessage, transfer: ArrayBuffer[] = []): void {
  port.postMessage(msg, transfer);
}

port.once("message", (msg: StartMessage) => {
  if (msg.type !== "start") return;
  const client = createClient(
    input.clientKind,
    { baseUrl: new URL(input.baseUrl), idleTimeoutMs: input.idleTimeoutMs },
    input.baseUrls.map((u) => new URL(u)),
  );
  runClosedLoop(buildIteration(input.spec, client), input.plan)
    .then((r) => {
      client.close();
      post({ type: "result", ...r }, [r.latenciesMs.buffer as ArrayBuffer]);
    })
    .catch((err: unknown) => {
      client.close();
      const e = err instanceof Error ? err : new Error(String(err));
      post({ type: "error", message: e.message, stack: e.stack ?? "" });
    });
});
post({ type: "ready" });
