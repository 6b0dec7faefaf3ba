// scale: how the server's queries cost as its data grows. Threads are created (POST /threads with
// metadata.user_id spread over --scale-users users) and store items put (namespace
// ["users", user], value {kind: one of 10, i}) up to each size of 1k, 10k, 100k, 1M, ... and
// --scale-threads; at each size, with one client and sequential requests:
//   search       POST /threads/search {metadata: {user_id}, limit: 10}        (newest first)
//   count        POST /threads/count {metadata: {user_id}}
//   count-all    POST /threads/count {}
//   newest       POST /threads/search {sort_by: updated_at, sort_order: desc, limit: 10}
//   get          GET /threads/{id} of a thread created earlier
//   ok-busy      GET /ok (on its own client thread) while 4 other clients search in a loop (--duration s), and those searches
//   wait         POST /threads then POST /threads/{id}/runs/wait (echo), the wait timed
//   store        POST /store/items/search {namespace_prefix: ["users", user], filter: {kind}, limit: 10}
//   store-wide   POST /store/items/search {namespace_prefix: ["users"], filter: {kind}, limit: 10}
// plus the growth rates (creates/s, puts/s at concurrency 32) and, with --scale-data-dir, the data
// dir's bytes (allocated blocks) and its growth per thread and per item.
import fs from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { createThread, expectOk, expectRunOutput, parseJson, runBody } from "../api.ts";
import { BenchCheckError, ErrorTally } from "../error-tally.ts";
import type { HttpClient, PreparedRequest } from "../http/types.ts";
import { runShardedLoop } from "../load/sharded-loop.ts";
import { SampleBuffer, summarize } from "../stats.ts";
import { metric } from "./metrics.ts";
import type { Metric, Scenario, ScenarioContext, ScenarioOutcome } from "./types.ts";

const GROW_CONCURRENCY = 32;
const SEARCH_CLIENTS = 4;
const KINDS = 10;
/** runs/wait not recorded before each size's (the first size's would pay the JIT's warm-up) */
const WAIT_WARMUP = 20;
/** thread ids kept for the get requests */
const ID_SAMPLE = 10_000;

/** 1k, 10k, 100k, ... below `target`, then `target`. */
export function scaleSizes(target: number): number[] {
  const sizes: number[] = [];
  for (let s = 1_000; s < target; s *= 10) sizes.push(s);
  sizes.push(target);
  return sizes;
}

const label = (n: number): string =>
  n >= 1_000_000 && n % 1_000_000 === 0 ? `${n / 1_000_000}M` : n >= 1_000 && n % 1_000 === 0 ? `${n / 1_000}k` : String(n);

/** Bytes allocated on disk by every file under `dir`. */
function dirBytes(dir: string): number {
  let total = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) total += dirBytes(p);
    else if (e.isFile()) total += fs.statSync(p).blocks * 512;
  }
  return total;
}

function countOf(body: unknown): number {
  if (typeof body !== "number") throw new BenchCheckError("bad count", JSON.stringify(body).slice(0, 200));
  return body;
}

class Scale {
  private threads = 0;
  private items = 0;
  private readonly ids: string[] = [];
  private readonly errors = new ErrorTally();
  private readonly metrics: Metric[] = [];
  private readonly users: number;
  private waitBaseline: number | undefined;

  constructor(private readonly ctx: ScenarioContext) {
    this.users = ctx.options.scaleUsers;
  }

  private get client(): HttpClient {
    return this.ctx.client;
  }

  private user(i: number): string {
    return `user-${i % this.users}`;
  }

  private randomUser(): string {
    return this.user(Math.floor(Math.random() * this.users));
  }

  async run(): Promise<ScenarioOutcome> {
    const o = this.ctx.options;
    const notes: string[] = [];
    this.threads = countOf(parseJson(await this.client.request(this.client.prepare("POST", "/threads/count", {}))));
    this.items = await this.itemsAlreadyPut(Math.min(o.scaleThreads, o.scaleStoreItems));
    if (this.threads > 0) notes.push(`the server had ${this.threads} threads and ${this.items} of this scenario's store items before it; sizes count them`);
    let lastBytes = o.scaleDataDir === null ? 0 : dirBytes(o.scaleDataDir);
    const sizes = scaleSizes(o.scaleThreads).filter((size) => size > this.threads);
    if (sizes.length === 0) notes.push(`nothing to grow: measured once at the server's ${this.threads} threads, reported as @${label(o.scaleThreads)}`);
    for (const size of sizes.length > 0 ? sizes : [o.scaleThreads]) {
      const at = `@${label(size)}`;
      const newThreads = size - this.threads;
      if (newThreads > 0) {
        this.metrics.push(metric(`${at} create rate`, await this.grow("threads", newThreads), "creates/s"));
        if (o.scaleDataDir !== null) {
          const bytes = dirBytes(o.scaleDataDir);
          this.metrics.push(metric(`${at} bytes/thread (growth)`, (bytes - lastBytes) / newThreads, "B"));
          lastBytes = bytes;
        }
      }
      const newItems = Math.min(size, o.scaleStoreItems) - this.items;
      if (newItems > 0) {
        this.metrics.push(metric(`${at} put rate`, await this.grow("items", newItems), "puts/s"));
        if (o.scaleDataDir !== null) {
          const bytes = dirBytes(o.scaleDataDir);
          this.metrics.push(metric(`${at} bytes/item (growth)`, (bytes - lastBytes) / newItems, "B"));
          lastBytes = bytes;
        }
      }
      this.ctx.progress(`  ${this.threads} threads, ${this.items} store items: measuring`);
      await this.measure(at);
      if (o.scaleDataDir !== null) this.metrics.push(metric(`${at} data dir`, dirBytes(o.scaleDataDir) / 1024 ** 2, "MB"));
    }
    return { metrics: this.metrics, errors: this.errors.report(), notes };
  }

  /** How many of this scenario's store items (item-0 … item-n-1) an earlier run left, checked at each size up to `max`. */
  private async itemsAlreadyPut(max: number): Promise<number> {
    let found = 0;
    for (const size of scaleSizes(max)) {
      const i = size - 1;
      const res = await this.client.request(this.client.prepare("GET", `/store/items?namespace=users.${this.user(i)}&key=item-${i}`));
      if (res.status !== 200 || parseJson(res) === null) break;
      found = size;
    }
    return found;
  }

  /** Thread ids for the get requests when this run created none (measuring an existing data dir). */
  private async sampleIds(): Promise<void> {
    for (let k = 0; k < 20 && this.ids.length < 1_000; k++) {
      const res = await this.client.request(
        this.client.prepare("POST", "/threads/search", { metadata: { user_id: this.randomUser() }, limit: 50, select: ["thread_id"] }),
      );
      expectOk(res);
      for (const t of parseJson(res) as { thread_id: string }[]) this.ids.push(t.thread_id);
    }
  }

  /** `n` more threads or store items, GROW_CONCURRENCY requests at a time; returns requests/s. Keeps a sample of thread ids. */
  private async grow(what: "threads" | "items", n: number): Promise<number> {
    const creating = what === "threads";
    const request = (i: number): PreparedRequest =>
      creating
        ? this.client.prepare("POST", "/threads", { metadata: { user_id: this.user(i) } })
        : this.client.prepare("PUT", "/store/items", { namespace: ["users", this.user(i)], key: `item-${i}`, value: { kind: `k${i % KINDS}`, i } });
    let next = 0;
    const base = creating ? this.threads : this.items;
    const t0 = performance.now();
    let lastReport = t0;
    const worker = async (): Promise<void> => {
      while (next < n) {
        const i = base + next++;
        try {
          const res = await this.client.request(request(i));
          expectOk(res);
          if (creating && (this.ids.length < ID_SAMPLE || i % 97 === 0)) {
            const id = (parseJson(res) as { thread_id?: string }).thread_id;
            if (typeof id === "string") {
              if (this.ids.length < ID_SAMPLE) this.ids.push(id);
              else this.ids[i % ID_SAMPLE] = id;
            }
          }
        } catch (err) {
          this.errors.addThrown(err);
        }
        if (performance.now() - lastReport > 10_000) {
          lastReport = performance.now();
          this.ctx.progress(`  ${what}: ${base + next}`);
        }
      }
    };
    await Promise.all(Array.from({ length: GROW_CONCURRENCY }, worker));
    if (creating) this.threads += n;
    else this.items += n;
    return n / ((performance.now() - t0) / 1000);
  }

  /** `samples` sequential requests from `make`; latency rows named `${at} ${what} p50|p99`. */
  private async sequential(at: string, what: string, make: () => PreparedRequest, check: (body: unknown) => void = () => undefined): Promise<number> {
    const lat = new SampleBuffer();
    for (let k = 0; k < this.ctx.options.scaleSamples; k++) {
      const req = make();
      const t = performance.now();
      try {
        const res = await this.client.request(req);
        const ms = performance.now() - t;
        expectOk(res);
        check(parseJson(res));
        lat.push(ms);
      } catch (err) {
        this.errors.addThrown(err);
      }
    }
    const s = summarize(lat.toArray());
    this.metrics.push(metric(`${at} ${what} p50`, s.p50Ms, "ms"), metric(`${at} ${what} p99`, s.p99Ms, "ms"));
    return s.p50Ms;
  }

  private searchRequest(): PreparedRequest {
    return this.client.prepare("POST", "/threads/search", { metadata: { user_id: this.randomUser() }, limit: 10 });
  }

  private async measure(at: string): Promise<void> {
    const c = this.client;
    const tenThreads = (body: unknown) => {
      if (!Array.isArray(body) || body.length !== Math.min(10, this.threads))
        throw new BenchCheckError("bad search", `${Array.isArray(body) ? body.length : typeof body} results`);
    };
    await this.sequential(
      at,
      "search",
      () => this.searchRequest(),
      (b) => {
        if (!Array.isArray(b)) throw new BenchCheckError("bad search", JSON.stringify(b).slice(0, 200));
      },
    );
    await this.sequential(at, "count", () => c.prepare("POST", "/threads/count", { metadata: { user_id: this.randomUser() } }), countOf);
    await this.sequential(at, "count-all", () => c.prepare("POST", "/threads/count", {}), countOf);
    await this.sequential(at, "newest", () => c.prepare("POST", "/threads/search", { sort_by: "updated_at", sort_order: "desc", limit: 10 }), tenThreads);
    if (this.ids.length === 0) await this.sampleIds();
    if (this.ids.length > 0) await this.sequential(at, "get", () => c.prepare("GET", `/threads/${this.ids[Math.floor(Math.random() * this.ids.length)]}`));
    await this.okWhileSearching(at);
    await this.waits(at);
    if (this.items > 0) {
      const kind = () => `k${Math.floor(Math.random() * KINDS)}`;
      await this.sequential(at, "store", () =>
        c.prepare("POST", "/store/items/search", { namespace_prefix: ["users", this.randomUser()], filter: { kind: kind() }, limit: 10 }),
      );
      await this.sequential(at, "store-wide", () =>
        c.prepare("POST", "/store/items/search", { namespace_prefix: ["users"], filter: { kind: kind() }, limit: 10 }),
      );
    }
  }

  /**
   * GET /ok in a loop beside SEARCH_CLIENTS clients searching in a loop, for --duration s. The /ok
   * probe runs on its own client worker thread: on the bench's main thread its timings would include
   * the searchers' client-side work (the probe's answer waits in the client's event loop), which is
   * not the server's latency.
   */
  private async okWhileSearching(at: string): Promise<void> {
    const o = this.ctx.options;
    const stopAt = performance.now() + o.durationMs;
    const searches = new SampleBuffer();
    const loop = async (req: () => PreparedRequest, into: SampleBuffer): Promise<void> => {
      while (performance.now() < stopAt) {
        const t = performance.now();
        try {
          expectOk(await this.client.request(req(), { discardBody: true }));
          into.push(performance.now() - t);
        } catch (err) {
          this.errors.addThrown(err);
        }
      }
    };
    const probe = runShardedLoop(
      { kind: "ok", echoGraph: o.echoGraph },
      { concurrency: 1, warmupMs: 0, durationMs: o.durationMs },
      { workers: 1, clientKind: o.client, baseUrl: o.url, baseUrls: o.urls, idleTimeoutMs: o.idleTimeoutMs },
    );
    const [ok] = await Promise.all([probe, ...Array.from({ length: SEARCH_CLIENTS }, () => loop(() => this.searchRequest(), searches))]);
    this.errors.merge(ok.errors);
    const okStats = summarize(ok.latenciesMs);
    const s = summarize(searches.toArray());
    this.metrics.push(
      metric(`${at} ok-busy p50`, okStats.p50Ms, "ms"),
      metric(`${at} ok-busy p99`, okStats.p99Ms, "ms"),
      metric(`${at} search-busy p50`, s.p50Ms, "ms"),
      metric(`${at} search-busy rate`, s.count / (o.durationMs / 1000), "req/s"),
    );
  }

  /** runs/wait on fresh threads, one at a time, after WAIT_WARMUP unrecorded ones; the p50 relative to the first size's. */
  private async waits(at: string): Promise<void> {
    const body = JSON.stringify(runBody(this.ctx.options.echoGraph));
    const lat = new SampleBuffer();
    for (let k = -WAIT_WARMUP; k < this.ctx.options.scaleWaitRuns; k++) {
      try {
        const threadId = await createThread(this.client);
        this.threads++;
        const t = performance.now();
        const res = await this.client.request(this.client.prepare("POST", `/threads/${threadId}/runs/wait`, body));
        if (k >= 0) lat.push(performance.now() - t);
        expectRunOutput(res);
      } catch (err) {
        this.errors.addThrown(err);
      }
    }
    const s = summarize(lat.toArray());
    this.waitBaseline ??= s.p50Ms;
    this.metrics.push(
      metric(`${at} wait p50`, s.p50Ms, "ms"),
      metric(`${at} wait p99`, s.p99Ms, "ms"),
      metric(`${at} wait p50 vs first`, s.p50Ms / this.waitBaseline, "x"),
    );
  }
}

export const scaleScenario: Scenario = {
  name: "scale",
  describe: (o) =>
    `grow to ${o.scaleThreads} threads (${o.scaleUsers} users) and ${o.scaleStoreItems} store items; at ${scaleSizes(o.scaleThreads).map(label).join(", ")}: search/count/get/newest, /ok while ${SEARCH_CLIENTS} clients search, runs/wait, store search`,
  run: (ctx) => new Scale(ctx).run(),
};
