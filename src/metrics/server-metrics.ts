// GET /metrics of a deployment server: LangGraph Platform's queue and worker gauges (`lg_api_`,
// the names and meanings of its Agent Server) and HTTP series, plus Troupe's own (`troupe_`):
// runs by graph and status, run durations and queue waits, open streams, webhook deliveries,
// rate-limit decisions, storage size, each thread's event-loop use and heap. Everything is read
// from counters kept as the work happens; a scrape reads no record and asks no other thread.
import { getHeapStatistics } from "node:v8";
import { Registry } from "prom-client";
import { QUEUE_WAIT_BUCKETS, RUN_DURATION_BUCKETS, RUN_END_STATUSES, type ShardMetricsReader } from "../bridge/shard-metrics.ts";
import type { RateLimitDecisions } from "../ratelimit/decisions.ts";
import type { WebhookCounters } from "../webhooks/counters.ts";
import type { StoragePort } from "../storage/port.ts";
import { HTTP_LATENCY_BUCKETS, type HttpRequestMetrics } from "./http-requests.ts";
import type { OpenStreams } from "./open-streams.ts";
import { ScrapedCounter, ScrapedGauge, ScrapedHistogram, type HistogramSample, type Sample } from "./scraped.ts";

export interface MetricsSources {
  http: HttpRequestMetrics;
  streams: OpenStreams;
  shards: ShardMetricsReader;
  /** whether shard i is up (a restarting shard is neither active nor available) */
  shardAlive(shard: number): boolean;
  /** the idle board (src/util/idle-gc.ts): slot 0 the HTTP thread, slot i + 1 shard i, utilisation in permille */
  idleBoard: SharedArrayBuffer;
  /** the webhook worker's delivery counters (src/webhooks/counters.ts); absent while no webhook can be sent (http.disable_webhooks) */
  webhooks?: WebhookCounters;
  /** absent without rate limits */
  rateLimits?: RateLimitDecisions;
  /** the storage's size (LMDB: the data file, and the pages in use as LMDB counts them: no scan) */
  storage: Pick<StoragePort, "usage">;
  /** the `node` label of every series (a cluster's nodes report their own series) */
  node: string;
}

export interface MetricsReply {
  contentType: string;
  body: string;
}

interface QueueFigures {
  pending: number;
  running: number;
  /** seconds */
  oldest: number;
  oldestUnblocked: number;
  median: number;
  /** actor worker threads: all, running a run, up and idle */
  max: number;
  active: number;
  available: number;
}

const s = <L extends string>(labels: Partial<Record<L, string | number>>, value: number): Sample<L> => ({ labels, value });

export class ServerMetrics {
  readonly registry = new Registry();
  private readonly elu: Int32Array;
  private scrapeQueue: QueueFigures | undefined;
  private readonly constLabels: Record<string, string>;

  constructor(private readonly src: MetricsSources) {
    // the node label is put on each series by the metrics themselves (constLabels), not as the
    // registry's default labels: prom-client would merge those into every line of every scrape
    this.constLabels = { node: src.node };
    this.elu = new Int32Array(src.idleBoard);
    this.platformSeries();
    this.runSeries();
    this.serverSeries();
  }

  /** The Prometheus text format, or (`format=json`) the platform's JSON shape plus every series. */
  async render(format: string | undefined): Promise<MetricsReply> {
    this.scrapeQueue = undefined; // read the shards once per scrape, for every queue gauge
    if (format === "json") return { contentType: "application/json", body: JSON.stringify(await this.json()) };
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  private queueNow(): QueueFigures {
    return (this.scrapeQueue ??= this.queue());
  }

  private queue(now = Date.now()): QueueFigures {
    const { shards } = this.src;
    let pending = 0,
      running = 0,
      oldest = 0,
      oldestUnblocked = 0,
      active = 0,
      alive = 0;
    for (let i = 0; i < shards.shards; i++) {
      const q = shards.queue(i, now);
      pending += q.pending;
      running += q.running;
      oldest = Math.max(oldest, q.oldestWaitSeconds);
      oldestUnblocked = Math.max(oldestUnblocked, q.oldestUnblockedWaitSeconds);
      if (!this.src.shardAlive(i)) continue;
      alive++;
      if (q.running > 0) active++;
    }
    return {
      pending,
      running,
      oldest,
      oldestUnblocked,
      median: pending === 0 ? 0 : shards.medianPendingWaitSeconds(now),
      max: shards.shards,
      active,
      available: alive - active,
    };
  }

  private async json(): Promise<Record<string, unknown>> {
    const q = this.queueNow();
    const requests: { method: string; path: string; status: number; count: number }[] = [];
    for (const c of this.src.http.cells()) for (const [status, count] of c.statuses) requests.push({ method: c.method, path: c.route, status, count });
    return {
      queue: {
        n_pending: q.pending,
        n_running: q.running,
        pending_runs_wait_time_max_secs: q.oldest,
        pending_runs_wait_time_med_secs: q.median,
        pending_unblocked_runs_wait_time_max_secs: q.oldestUnblocked,
      },
      workers: { max: q.max, active: q.active, available: q.available },
      api: { http_requests_total: requests },
      metrics: await this.registry.getMetricsAsJSON(),
    };
  }

  /** lg_api_*: the Agent Server's names; "workers" are the actor worker threads. */
  private platformSeries(): void {
    const registry = this.registry;
    const constLabels = this.constLabels;
    const read = () => this.queueNow();
    const gauge = (name: string, help: string, value: () => number) => new ScrapedGauge({ name, help, registry, constLabels }, () => [s({}, value())]);
    gauge("lg_api_num_pending_runs", "The number of runs currently pending.", () => read().pending);
    gauge("lg_api_num_running_runs", "The number of runs currently running.", () => read().running);
    gauge("lg_api_pending_runs_wait_time_max", "The maximum time a run has been pending, in seconds.", () => read().oldest);
    gauge("lg_api_pending_runs_wait_time_med", "The median pending wait time across runs, in seconds (to within ~10%).", () => read().median);
    gauge(
      "lg_api_pending_unblocked_runs_wait_time_max",
      "The maximum time a run has been pending excluding runs blocked by another run on the same thread, in seconds.",
      () => read().oldestUnblocked,
    );
    gauge("lg_api_workers_max", "The maximum number of workers available (actor worker threads).", () => read().max);
    gauge("lg_api_workers_active", "The number of currently active workers (actor worker threads running at least one run).", () => read().active);
    gauge("lg_api_workers_available", "The number of available (idle) workers.", () => read().available);

    const http = this.src.http;
    new ScrapedCounter(
      {
        name: "lg_api_http_requests_total",
        help: "Total number of HTTP requests (path: the route template).",
        labelNames: ["method", "path", "status"],
        registry,
        constLabels,
      },
      () => {
        const out: Sample<"method" | "path" | "status">[] = [];
        for (const c of http.cells()) for (const [status, count] of c.statuses) out.push(s({ method: c.method, path: c.route, status }, count));
        return out;
      },
    );
    new ScrapedHistogram(
      {
        name: "lg_api_http_requests_latency_seconds",
        help: "HTTP request latency in seconds, to the response head (a stream: until it opened).",
        labelNames: ["method", "path"],
        registry,
        constLabels,
      },
      HTTP_LATENCY_BUCKETS,
      () => http.cells().map((c) => ({ labels: { method: c.method, path: c.route }, values: { counts: [...c.buckets], sum: c.sum, count: c.count } })),
    );
  }

  private runSeries(): void {
    const { registry, constLabels } = this;
    const shards = this.src.shards;
    const graphs = shards.graphLabels;
    new ScrapedCounter(
      {
        name: "troupe_runs_started_total",
        help: "Run executions started (a run resumed after a restart starts again).",
        labelNames: ["graph_id"],
        registry,
        constLabels,
      },
      () => graphs.map((g, i) => s({ graph_id: g }, shards.started(i))).filter((x) => x.value > 0 || x.labels.graph_id !== "other"),
    );
    new ScrapedCounter(
      {
        name: "troupe_runs_finished_total",
        help: "Runs that ended, by final status (a run cancelled while pending included).",
        labelNames: ["graph_id", "status"],
        registry,
        constLabels,
      },
      () => {
        const out: Sample<"graph_id" | "status">[] = [];
        graphs.forEach((g, i) => {
          for (const status of RUN_END_STATUSES) {
            const n = shards.finished(i, status);
            if (n > 0 || g !== "other") out.push(s({ graph_id: g, status }, n));
          }
        });
        return out;
      },
    );
    new ScrapedHistogram(
      {
        name: "troupe_run_duration_seconds",
        help: "Run execution time (start to final status), by final status.",
        labelNames: ["graph_id", "status"],
        registry,
        constLabels,
      },
      RUN_DURATION_BUCKETS,
      () => {
        const out: HistogramSample<"graph_id" | "status">[] = [];
        graphs.forEach((g, i) => {
          for (const status of RUN_END_STATUSES) {
            const values = shards.duration(i, status);
            if (values.count > 0) out.push({ labels: { graph_id: g, status }, values });
          }
        });
        return out;
      },
    );
    new ScrapedHistogram(
      {
        name: "troupe_run_queue_wait_seconds",
        help: "Time a run waited from its creation (or its scheduled start) until it started.",
        labelNames: ["graph_id"],
        registry,
        constLabels,
      },
      QUEUE_WAIT_BUCKETS,
      () => graphs.map((g, i) => ({ labels: { graph_id: g }, values: shards.queueWait(i) })).filter((h) => h.values.count > 0),
    );
  }

  private serverSeries(): void {
    const { registry, src, constLabels } = this;
    new ScrapedGauge(
      { name: "troupe_stream_subscribers", help: "Streams open now: SSE responses and WebSocket connections.", labelNames: ["kind"], registry, constLabels },
      () => [s({ kind: "sse" }, src.streams.sse), s({ kind: "websocket" }, src.streams.websocket)],
    );
    const webhooks = src.webhooks;
    if (webhooks) {
      new ScrapedCounter(
        {
          name: "troupe_webhook_deliveries_total",
          help: "Run webhook deliveries by outcome: delivered (the receiver answered 2xx), failed (given up: retries exhausted, 410 Gone, or refused by the URL policy).",
          labelNames: ["outcome"],
          registry,
          constLabels,
        },
        () => {
          const c = webhooks.snapshot();
          return [s({ outcome: "delivered" }, c.delivered), s({ outcome: "failed" }, c.failed)];
        },
      );
      new ScrapedCounter({ name: "troupe_webhook_attempts_total", help: "Webhook delivery attempts (HTTP requests made).", registry, constLabels }, () => [
        s({}, webhooks.snapshot().attempts),
      ]);
      new ScrapedCounter(
        {
          name: "troupe_webhook_retries_total",
          help: "Webhook attempts that failed and were scheduled again (the outbox's retry schedule).",
          registry,
          constLabels,
        },
        () => [s({}, webhooks.snapshot().retried)],
      );
    }
    const rateLimits = src.rateLimits;
    if (rateLimits) {
      new ScrapedCounter(
        {
          name: "troupe_rate_limit_decisions_total",
          help: "Rate-limit decisions by rule: allowed (the rule reported in X-RateLimit-*) or limited (429).",
          labelNames: ["rule", "decision"],
          registry,
          constLabels,
        },
        () => rateLimits.entries().flatMap(([rule, d]) => [s({ rule, decision: "allowed" }, d.allowed), s({ rule, decision: "limited" }, d.limited)]),
      );
    }
    new ScrapedGauge(
      {
        name: "troupe_storage_bytes",
        help: "Storage size. LMDB: the data file (file) and the pages in use up to the highest one written (used). PostgreSQL: the database (file) and Troupe's tables with their indexes and TOAST (used).",
        labelNames: ["kind"],
        registry,
        constLabels,
      },
      async () => {
        const usage = await src.storage.usage(); // undefined: the file is gone or the storage closed (shutdown): no sample
        return usage === undefined ? [] : [s({ kind: "file" }, usage.fileBytes), s({ kind: "used" }, usage.usedBytes)];
      },
    );
    const threads = (): string[] => ["http", ...Array.from({ length: src.shards.shards }, (_, i) => `actor-${i}`)];
    new ScrapedGauge(
      {
        name: "troupe_thread_event_loop_utilization",
        help: "Event-loop utilisation (0-1) of the HTTP thread and each actor worker over its last 1 s sample.",
        labelNames: ["thread"],
        registry,
        constLabels,
      },
      () => threads().map((thread, i) => s({ thread }, Atomics.load(this.elu, i) / 1000)),
    );
    new ScrapedGauge(
      {
        name: "troupe_thread_heap_used_bytes",
        help: "V8 heap in use per thread (actor workers: as of their last 1 s snapshot).",
        labelNames: ["thread"],
        registry,
        constLabels,
      },
      () => {
        const now = Date.now();
        return threads().map((thread, i) => s({ thread }, i === 0 ? getHeapStatistics().used_heap_size : src.shards.queue(i - 1, now).heapUsed));
      },
    );
    new ScrapedGauge({ name: "process_resident_memory_bytes", help: "Resident memory size in bytes (the whole process).", registry, constLabels }, () => [
      s({}, process.memoryUsage.rss()),
    ]);
    new ScrapedCounter(
      { name: "process_cpu_seconds_total", help: "Total user and system CPU time spent in seconds (the whole process).", registry, constLabels },
      () => {
        const u = process.cpuUsage();
        return [s({}, (u.user + u.system) / 1e6)];
      },
    );
  }
}
