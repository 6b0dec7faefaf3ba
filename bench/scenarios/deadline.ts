// Bounds the open-ended scenarios: a dedicated client that is closed when the scenario's time
// is up, so a hung or ever-streaming server cannot keep the bench running.
import { performance } from "node:perf_hooks";
import { createClient } from "../http/create-client.ts";
import { TransportError, type HttpClient } from "../http/types.ts";
import type { ScenarioContext } from "./types.ts";

export interface Deadline {
  client: HttpClient;
  /** performance.now() value at which the scenario must stop. */
  at: number;
  expired(): boolean;
}

export async function withDeadline<T>(ctx: ScenarioContext, fn: (d: Deadline) => Promise<T>, { idleTimeoutMs = ctx.options.idleTimeoutMs } = {}): Promise<T> {
  const at = performance.now() + ctx.options.scenarioTimeoutMs;
  const client = createClient(ctx.options.client, { baseUrl: ctx.options.url, idleTimeoutMs }, ctx.options.urls);
  let fired = false;
  const timer = setTimeout(() => {
    fired = true;
    client.close(new TransportError("scenario-timeout", "stopped by --scenario-timeout"));
  }, ctx.options.scenarioTimeoutMs);
  try {
    return await fn({ client, at, expired: () => fired || performance.now() >= at });
  } finally {
    clearTimeout(timer);
    client.close();
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
