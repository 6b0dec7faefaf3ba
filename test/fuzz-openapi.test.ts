// Seeded fuzz test over the server's own /openapi.json (issue 17.7): for every operation, requests
// built from its schemas — mostly valid-looking, then mutated (missing and mistyped fields, nulls,
// long strings, huge lists, deep nesting, junk JSON, other content types, bad ids, odd queries,
// other methods) — against a real server. No reply may be a 5xx, every error must have a JSON
// body, and /ok must answer between batches. FUZZ_SEED=<n> picks the generator's seed (ids the
// server hands out, and the order concurrent replies come back in, still vary between runs: a
// failure prints each offending request in full enough to replay by hand); FUZZ_REQUESTS=<n>
// changes how many requests each operation gets (default 40: ~2,700 requests in all).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./helpers/server.ts";

type Schema = {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  additionalProperties?: Schema | boolean;
  enum?: unknown[];
  const?: unknown;
  anyOf?: Schema[];
  oneOf?: Schema[];
  format?: string;
  minimum?: number;
  maximum?: number;
  minItems?: number;
  maxItems?: number;
  maxLength?: number;
};
interface Operation {
  method: string;
  path: string;
  pathParams: string[];
  query: { name: string; schema: Schema }[];
  body?: Schema;
}
interface Outcome {
  status: number;
  request: string;
}

const SEED = Number(process.env.FUZZ_SEED ?? 17);
const PER_OPERATION = Number(process.env.FUZZ_REQUESTS ?? 40);
const CONCURRENCY = 8;
const OK_EVERY = 100;

/** mulberry32: small, fast, seedable */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const GRAPHS = ["echo", "agent", "subgraph", "interrupt_steps", "error", "store_graph", "context", "custom_stream", "uncompiled", "factory"];
const ODD_STRINGS = ["", " ", "a.b", "*", "../../etc/passwd", "%00", "\u0000", "😀".repeat(3), "\ud800", "null", "values", "x".repeat(300), "é".repeat(5000)];

class Fuzzer {
  readonly ids: Record<string, string[]> = { thread_id: [], run_id: [], assistant_id: [...GRAPHS], cron_id: [], checkpoint_id: [] };
  constructor(readonly rand: () => number) {}

  chance(p: number): boolean {
    return this.rand() < p;
  }
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.rand() * (hi - lo + 1));
  }
  pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.rand() * xs.length)]!;
  }
  uuid(): string {
    const h = () => this.int(0, 15).toString(16);
    const s = Array.from({ length: 32 }, h).join("");
    return `${s.slice(0, 8)}-${s.slice(8, 12)}-4${s.slice(13, 16)}-8${s.slice(17, 20)}-${s.slice(20)}`;
  }
  oddString(): string {
    return this.chance(0.1) ? "z".repeat(this.pick([257, 2000, 5000])) : this.pick(ODD_STRINGS);
  }

  /** an id for a parameter or field of this name: a known one, a fresh UUID, or junk */
  idFor(name: string): string {
    const known = this.ids[name];
    const r = this.rand();
    if (known?.length && r < 0.6) return this.pick(known);
    if (r < 0.8) return this.uuid();
    return this.oddString();
  }

  remember(value: unknown, depth = 0): void {
    if (depth > 2 || value === null || typeof value !== "object") return;
    if (Array.isArray(value)) {
      for (const v of value.slice(0, 5)) this.remember(v, depth + 1);
      return;
    }
    for (const [k, v] of Object.entries(value)) {
      const pool = this.ids[k];
      if (pool && typeof v === "string" && !pool.includes(v)) {
        pool.push(v);
        if (pool.length > 30) pool.splice(GRAPHS.length, 1);
      } else if (typeof v === "object") this.remember(v, depth + 1);
    }
  }

  /** a value that mostly fits the schema */
  value(s: Schema | undefined, name = "", depth = 0): unknown {
    if (!s || depth > 6) return this.anyJson(1);
    if (s.const !== undefined) return s.const;
    if (s.enum) return this.pick(s.enum);
    const union = s.anyOf ?? s.oneOf;
    if (union) return this.value(this.pick(union), name, depth + 1);
    const type = Array.isArray(s.type) ? this.pick(s.type) : s.type;
    switch (type) {
      case "object": {
        const out: Record<string, unknown> = {};
        for (const [k, sub] of Object.entries(s.properties ?? {})) {
          if (s.required?.includes(k) || this.chance(0.5)) out[k] = this.value(sub, k, depth + 1);
        }
        if (typeof s.additionalProperties === "object" && this.chance(0.5)) out[`k${this.int(0, 9)}`] = this.value(s.additionalProperties, "", depth + 1);
        return out;
      }
      case "array": {
        const n = this.int(s.minItems ?? 0, Math.min(s.maxItems ?? 3, (s.minItems ?? 0) + 3));
        return Array.from({ length: n }, () => this.value(s.items, name, depth + 1));
      }
      case "string":
        if (s.format === "uuid" || name.endsWith("_id")) return this.idFor(name);
        if (s.format === "date-time") return new Date(Date.UTC(2030, 0, 1) + this.int(0, 1e9)).toISOString();
        if (name === "schedule") return this.pick(["*/5 * * * *", "0 0 * * *", "bogus", "* * * * * *"]);
        if (name === "assistant_id" || name === "graph_id") return this.idFor("assistant_id");
        return this.chance(0.8) ? this.pick(["a", "b", "values", "messages", "echo", "x.y", "k"]) : this.oddString();
      case "integer":
        return this.chance(0.8) ? this.int(s.minimum ?? 0, Math.min(s.maximum ?? 20, (s.minimum ?? 0) + 20)) : this.pick([-1, 0, 2 ** 31, 1e15]);
      case "number":
        return this.chance(0.8) ? this.int(0, 5) : this.pick([-1, 0.5, 1e308]);
      case "boolean":
        return this.chance(0.5);
      case "null":
        return null;
      default:
        if (name === "input") return { messages: [{ role: "human", content: "hi" }] };
        return this.anyJson(2);
    }
  }

  anyJson(depth: number): unknown {
    const r = this.rand();
    if (depth <= 0 || r < 0.5) return this.pick([null, true, 1, -2.5, "s", "", "😀"]);
    if (r < 0.75) return Array.from({ length: this.int(0, 3) }, () => this.anyJson(depth - 1));
    return Object.fromEntries(Array.from({ length: this.int(0, 3) }, (_, i) => [`f${i}`, this.anyJson(depth - 1)]));
  }

  /** one mutation of a (valid-looking) body */
  mutate(body: unknown, schema: Schema | undefined): unknown {
    const obj = body !== null && typeof body === "object" && !Array.isArray(body) ? { ...(body as Record<string, unknown>) } : {};
    const keys = Object.keys(schema?.properties ?? {});
    const key = keys.length ? this.pick(keys) : "x";
    switch (this.int(0, 11)) {
      case 0:
        if (schema?.required?.length) delete obj[this.pick(schema.required)];
        return obj;
      case 1:
        obj[key] = this.pick([5, "str", true, [], {}, -1]);
        return obj;
      case 2:
        obj[key] = null;
        return obj;
      case 3:
        obj[key] = "q".repeat(this.pick([300, 5000, 100_000]));
        return obj;
      case 4:
        obj[key] = new Array(this.pick([1000, 30_000])).fill(this.pick([null, 1, "x", {}]));
        return obj;
      case 5:
        obj[`extra_${this.int(0, 99)}`] = this.anyJson(2);
        return obj;
      case 6: {
        let deep: unknown = 1;
        for (let i = 0; i < this.pick([100, 600]); i++) deep = [deep];
        obj[key] = deep;
        return obj;
      }
      case 7:
        return this.pick([[], 5, "text", null, true, [obj]]);
      case 8:
        obj[key] = this.oddString();
        return obj;
      case 9:
        obj[key] = this.pick([-1, 0, 1.5, 1e308, -1e308, 2 ** 53 + 1]);
        return obj;
      case 10:
        obj[key] = { [this.oddString()]: this.anyJson(2) };
        return obj;
      default:
        obj[key] = this.value(schema?.properties?.[key], key);
        obj[keys.length ? this.pick(keys) : "y"] = this.anyJson(3);
        return obj;
    }
  }

  /** a JSON-RPC call of the A2A or MCP front, with odd ids and params now and then */
  rpc(mcp: boolean): unknown {
    const method = mcp
      ? this.pick(["initialize", "ping", "tools/list", "tools/call", "nope"])
      : this.pick([
          "SendMessage",
          "SendStreamingMessage",
          "GetTask",
          "CancelTask",
          "ListTasks",
          "GetExtendedAgentCard",
          "message/send",
          "message/stream",
          "tasks/get",
          "tasks/cancel",
          "nope",
        ]);
    const id = this.chance(0.9) ? this.idFor("run_id") : this.oddString();
    const message = {
      role: this.pick(["user", "agent", "ROLE_USER", "x"]),
      parts: [this.pick([{ kind: "text", text: "hi" }, { text: "hi" }, { kind: "data", data: this.anyJson(2) }, {}])],
      messageId: this.uuid(),
      ...(this.chance(0.5) ? { contextId: this.idFor("thread_id") } : {}),
      ...(this.chance(0.3) ? { taskId: id } : {}),
    };
    const params = mcp
      ? {
          name: this.chance(0.7) ? this.pick(GRAPHS) : this.oddString(),
          arguments: this.chance(0.8) ? { messages: [{ role: "human", content: "hi" }] } : this.anyJson(2),
        }
      : {
          id,
          name: `tasks/${id}`,
          message,
          historyLength: this.pick([0, 1, -1, 1000, "x"]),
          pageSize: this.pick([1, 0, 101, "x"]),
          contextId: this.idFor("thread_id"),
          status: this.pick(["completed", "TASK_STATE_WORKING", "x"]),
        };
    const call: Record<string, unknown> = { jsonrpc: "2.0", id: this.int(0, 1000), method, params };
    return this.chance(0.3) ? this.mutate(call, { properties: { jsonrpc: {}, id: {}, method: {}, params: {} }, required: ["jsonrpc", "method"] }) : call;
  }

  /** a request for the operation: [method, url, init] */
  request(op: Operation, base: string): { method: string; url: string; init: RequestInit } {
    let path = op.path;
    for (const p of op.pathParams) path = path.replace(`{${p}}`, encodePathPart(this.idFor(p)));
    const q = new URLSearchParams();
    for (const { name, schema } of op.query) {
      if (!this.chance(0.5)) continue;
      const v = this.chance(0.85) ? this.value(schema, name) : this.oddString();
      for (const item of Array.isArray(v) ? v : [v]) q.append(name, typeof item === "string" ? item : JSON.stringify(item));
    }
    if (this.chance(0.05)) q.append(this.oddString() || "junk", this.oddString());
    let method = op.method.toUpperCase();
    if (this.chance(0.04)) method = this.pick(["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"]);
    const headers: Record<string, string> = {};
    let body: string | undefined;
    if (method === "POST" && (op.path.startsWith("/a2a/") || op.path === "/mcp") && this.chance(0.7)) {
      headers["content-type"] = "application/json";
      headers.accept = "application/json, text/event-stream";
      body = JSON.stringify(this.rpc(op.path === "/mcp"));
    } else if (op.body && method !== "GET" && method !== "HEAD") {
      let value = this.value(op.body);
      if (this.chance(0.6)) value = this.mutate(value, op.body);
      if (this.chance(0.3)) value = this.mutate(value, op.body);
      body = this.chance(0.04) ? this.pick(["{nope", "", "\u0000\u0001", "[1,2", '{"a":1}garbage']) : JSON.stringify(value);
      headers["content-type"] = this.chance(0.9)
        ? "application/json"
        : this.pick(["text/plain", "application/x-www-form-urlencoded", "application/vnd.api+json", "multipart/form-data; boundary=x"]);
    }
    if (this.chance(0.03)) headers["x-auth-scheme"] = this.oddString().replace(/[^\x20-\x7e]/g, "");
    const qs = q.toString();
    return { method, url: `${base}${path}${qs ? `?${qs}` : ""}`, init: { method, headers, body } };
  }
}

/** percent-encoded; a lone surrogate becomes the (invalid UTF-8) bytes it would have been */
function encodePathPart(v: string): string {
  try {
    return encodeURIComponent(v);
  } catch {
    return v
      .split(/([\ud800-\udfff])/)
      .map((part) => (/^[\ud800-\udfff]$/.test(part) ? "%ED%A0%80" : encodeURIComponent(part)))
      .join("");
  }
}

function operations(doc: {
  paths: Record<
    string,
    Record<string, { parameters?: { name: string; in: string; schema: Schema }[]; requestBody?: { content: Record<string, { schema: Schema }> } }>
  >;
}): Operation[] {
  const out: Operation[] = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const params = op.parameters ?? [];
      out.push({
        method,
        path,
        pathParams: params.filter((p) => p.in === "path").map((p) => p.name),
        query: params.filter((p) => p.in === "query").map((p) => ({ name: p.name, schema: p.schema })),
        body: op.requestBody?.content["application/json"]?.schema,
      });
    }
  }
  return out;
}

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ workers: 2 });
}, 60_000);
afterAll(async () => {
  await server?.stop();
  server?.cleanup();
});

describe(`fuzzing the API from /openapi.json (seed ${SEED})`, () => {
  it("never answers 5xx, answers every error with JSON, and keeps /ok answering", { timeout: 120_000 }, async () => {
    const doc = await (await fetch(`${server.url}/openapi.json`)).json();
    const ops = operations(doc);
    expect(ops.length).toBeGreaterThan(60);
    const fz = new Fuzzer(prng(SEED));
    // each operation PER_OPERATION times, interleaved in a seeded order
    const plan = ops.flatMap((op) => Array.from({ length: PER_OPERATION }, () => op));
    for (let i = plan.length - 1; i > 0; i--) {
      const j = Math.floor(fz.rand() * (i + 1));
      [plan[i], plan[j]] = [plan[j]!, plan[i]!];
    }
    const failures: string[] = [];
    const statuses = new Map<number, number>();
    let timeouts = 0;
    let next = 0;
    let sinceOk = 0;

    const one = async (op: Operation): Promise<Outcome | undefined> => {
      const { method, url, init } = fz.request(op, server.url);
      const label = `${method} ${url.slice(server.url.length, server.url.length + 160)} ${String(init.body ?? "").slice(0, 160)}`;
      let res: Response;
      try {
        res = await fetch(url, { ...init, signal: AbortSignal.timeout(15_000) });
      } catch (err) {
        // a request that waits on purpose (a join on a run scheduled far ahead) is cut here
        if ((err as Error).name === "TimeoutError") timeouts++;
        else failures.push(`${label} → ${(err as Error).message} ${String((err as { cause?: unknown }).cause ?? "")}`);
        return undefined;
      }
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      const type = res.headers.get("content-type") ?? "";
      if (res.status < 400 && (type.startsWith("text/event-stream") || op.path.endsWith("/wait") || op.path.endsWith("/join"))) {
        await res.body?.cancel();
        return { status: res.status, request: label };
      }
      const text = await res.text();
      if (method === "HEAD") {
        if (res.status >= 500) failures.push(`${label} → ${res.status}`);
        return { status: res.status, request: label };
      }
      if (res.status >= 500) failures.push(`${label} → ${res.status} ${text.slice(0, 300)}`);
      else if (res.status >= 400) {
        let parsed: unknown;
        try {
          parsed = JSON.parse(text);
        } catch {
          failures.push(`${label} → ${res.status} with a non-JSON body: ${text.slice(0, 200)}`);
        }
        if (parsed !== undefined && (parsed === null || typeof parsed !== "object"))
          failures.push(`${label} → ${res.status} body is not a JSON object: ${text.slice(0, 200)}`);
      } else if (type.startsWith("application/json")) {
        try {
          const parsed = JSON.parse(text) as { error?: { code?: unknown } };
          // a JSON-RPC front's "Internal error" is a 500 in disguise
          if (parsed?.error?.code === -32603) failures.push(`${label} → JSON-RPC internal error: ${text.slice(0, 200)}`);
          fz.remember(parsed);
        } catch {
          failures.push(`${label} → ${res.status} claims JSON but is not: ${text.slice(0, 200)}`);
        }
      }
      return { status: res.status, request: label };
    };

    const okCheck = async () => {
      const t0 = Date.now();
      const ok = await fetch(`${server.url}/ok`, { signal: AbortSignal.timeout(10_000) }).catch((err: Error) => err);
      if (ok instanceof Error || ok.status !== 200)
        failures.push(`/ok did not answer 200 between batches (${ok instanceof Error ? ok.message : ok.status}) after ${Date.now() - t0} ms`);
      else await ok.text();
    };

    const worker = async () => {
      while (next < plan.length) {
        const op = plan[next++]!;
        await one(op);
        if (++sinceOk >= OK_EVERY) {
          sinceOk = 0;
          await okCheck();
        }
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    await okCheck();

    const summary = [...statuses.entries()]
      .sort(([a], [b]) => a - b)
      .map(([s, n]) => `${s}×${n}`)
      .join(" ");
    console.log(`[fuzz] seed ${SEED}: ${plan.length} requests over ${ops.length} operations; statuses ${summary}; ${timeouts} cut after 15 s`);
    for (const f of failures.slice(0, 40)) console.log(`[fuzz] ${f}`);
    if (failures.length)
      console.log(
        `[fuzz] server log:\n${server
          .output()
          .split("\n")
          .filter((l) => !l.startsWith("troupe"))
          .slice(-60)
          .join("\n")}`,
      );
    expect(failures, `seed ${SEED} (FUZZ_SEED=${SEED} to replay)`).toEqual([]);
    // the mutations reach validation and the handlers alike
    expect(statuses.get(422) ?? 0).toBeGreaterThan(100);
    expect(statuses.get(200) ?? 0).toBeGreaterThan(100);
  });
});
