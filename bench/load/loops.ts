// The closed-loop iterations, named by a serialisable spec so client worker threads can rebuild
// exactly the same loop the main thread would run.
import { performance } from "node:perf_hooks";
import { createThread, expectOk, expectRunOutput, runBody } from "../api.ts";
import type { HttpClient } from "../http/types.ts";
import type { Iteration } from "./closed-loop.ts";

export type LoopKind = "ok" | "thread-create" | "thread-wait" | "stateless-wait";

export interface LoopSpec {
  kind: LoopKind;
  echoGraph: string;
}

export function buildIteration(spec: LoopSpec, client: HttpClient): Iteration {
  switch (spec.kind) {
    case "ok": {
      const req = client.prepare("GET", "/ok");
      return async () => {
        const t0 = performance.now();
        const res = await client.request(req, { discardBody: true });
        const ms = performance.now() - t0;
        expectOk(res);
        return ms;
      };
    }
    case "thread-create": {
      const req = client.prepare("POST", "/threads", {});
      return async () => {
        const t0 = performance.now();
        const res = await client.request(req);
        const ms = performance.now() - t0;
        expectOk(res);
        return ms;
      };
    }
    case "thread-wait": {
      const body = JSON.stringify(runBody(spec.echoGraph));
      return async () => {
        const threadId = await createThread(client);
        const req = client.prepare("POST", `/threads/${threadId}/runs/wait`, body);
        const t0 = performance.now();
        const res = await client.request(req);
        const ms = performance.now() - t0;
        expectRunOutput(res);
        return ms;
      };
    }
    case "stateless-wait": {
      const req = client.prepare("POST", "/runs/wait", runBody(spec.echoGraph));
      return async () => {
        const t0 = performance.now();
        const res = await client.request(req);
        const ms = performance.now() - t0;
        expectRunOutput(res);
        return ms;
      };
    }
  }
}
