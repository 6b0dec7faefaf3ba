// The closed-loop iterations, named by a serialisable spec so client worker threads can rebuild
// exactly the same loop the main thread would run.
import { performance } from "node:perf_hooks";
import { createThread, expectOk, expectRunOutput, runBody } from "../api.ts";
import type { BenchResponse, HttpClient, PreparedRequest, RequestOptions } from "../http/types.ts";
import type { Iteration } from "./closed-loop.ts";

export type LoopKind = "ok" | "thread-create" | "thread-wait" | "stateless-wait";

export interface LoopSpec {
  kind: LoopKind;
  echoGraph: string;
}

export function buildIteration(spec: LoopSpec, client: HttpClient): Iteration {
  /** Milliseconds of one request (the check runs after the clock stops; it throws on a bad answer). */
  const timed = async (req: PreparedRequest, check: (res: BenchResponse) => void, opts?: RequestOptions): Promise<number> => {
    const t0 = performance.now();
    const res = await client.request(req, opts);
    const ms = performance.now() - t0;
    check(res);
    return ms;
  };
  switch (spec.kind) {
    case "ok": {
      const req = client.prepare("GET", "/ok");
      return () => timed(req, expectOk, { discardBody: true });
    }
    case "thread-create": {
      const req = client.prepare("POST", "/threads", {});
      return () => timed(req, expectOk);
    }
    case "thread-wait": {
      const body = JSON.stringify(runBody(spec.echoGraph));
      return async () => {
        const threadId = await createThread(client);
        return timed(client.prepare("POST", `/threads/${threadId}/runs/wait`, body), expectRunOutput);
      };
    }
    case "stateless-wait": {
      const req = client.prepare("POST", "/runs/wait", runBody(spec.echoGraph));
      return () => timed(req, expectRunOutput);
    }
  }
}
