// The few LangGraph deployment-API calls the scenarios make, with the checks that turn a wrong
// answer (non-2xx, `__error__` output, missing id) into a BenchCheckError.
import { BenchCheckError } from "./error-tally.ts";
import type { BenchResponse, HttpClient } from "./http/types.ts";

export const BENCH_INPUT = { messages: [{ role: "human", content: "hi" }] } as const;

export interface RunBodyOptions {
  /** Sent as `config.configurable.sleep_ms` (the slow graph's knob). */
  sleepMs?: number;
  multitaskStrategy?: "reject" | "interrupt" | "rollback" | "enqueue";
}

export function runBody(assistantId: string, opts: RunBodyOptions = {}): Record<string, unknown> {
  const body: Record<string, unknown> = { assistant_id: assistantId, input: BENCH_INPUT };
  if (opts.sleepMs !== undefined) body.config = { configurable: { sleep_ms: opts.sleepMs } };
  if (opts.multitaskStrategy !== undefined) body.multitask_strategy = opts.multitaskStrategy;
  return body;
}

export function expectOk(res: BenchResponse): void {
  if (res.status < 200 || res.status >= 300) {
    throw new BenchCheckError(`HTTP ${res.status}`, res.body.toString("utf8", 0, Math.min(res.body.length, 300)));
  }
}

export function parseJson(res: BenchResponse): unknown {
  try {
    return JSON.parse(res.body.toString("utf8"));
  } catch {
    throw new BenchCheckError("bad JSON", res.body.toString("utf8", 0, Math.min(res.body.length, 200)));
  }
}

function stringField(value: unknown, key: string): string {
  const v = typeof value === "object" && value !== null ? (value as Record<string, unknown>)[key] : undefined;
  if (typeof v !== "string" || v === "") throw new BenchCheckError(`missing ${key}`, JSON.stringify(value).slice(0, 200));
  return v;
}

/** 2xx and the run output is not an `{"__error__": …}` object. */
export function expectRunOutput(res: BenchResponse): void {
  expectOk(res);
  const out = parseJson(res);
  if (typeof out === "object" && out !== null && "__error__" in out) {
    throw new BenchCheckError("run error", JSON.stringify((out as Record<string, unknown>).__error__).slice(0, 300));
  }
}

export async function createThread(client: HttpClient): Promise<string> {
  const res = await client.request(client.prepare("POST", "/threads", {}));
  expectOk(res);
  return stringField(parseJson(res), "thread_id");
}

/** Background run creation; returns the new run id. */
export async function createBackgroundRun(client: HttpClient, threadId: string, body: Record<string, unknown>): Promise<string> {
  const res = await client.request(client.prepare("POST", `/threads/${threadId}/runs`, body));
  expectOk(res);
  return stringField(parseJson(res), "run_id");
}

export interface RunSummary {
  runId: string;
  status: string;
}

/** One page of `GET /threads/{id}/runs`. */
export async function listRuns(client: HttpClient, threadId: string, limit: number, offset: number): Promise<RunSummary[]> {
  const res = await client.request(client.prepare("GET", `/threads/${threadId}/runs?limit=${limit}&offset=${offset}`));
  expectOk(res);
  const list = parseJson(res);
  if (!Array.isArray(list)) throw new BenchCheckError("bad run list", JSON.stringify(list).slice(0, 200));
  return list.map((r: unknown) => ({ runId: stringField(r, "run_id"), status: stringField(r, "status") }));
}
