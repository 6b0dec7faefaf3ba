// HTTP-thread side of the actor runtime: a Piscina pool whose workers each run one long-lived
// shard task; requests are routed to the shard owning the thread id and answered by reqId.
// A shard that dies is restarted (its actors recover their runs from LMDB) and every request
// pending on it is rejected.
import { trace } from "../util/trace.ts";
import { MessageChannel, type MessagePort } from "node:worker_threads";
import { availableParallelism } from "node:os";
import { Piscina } from "piscina";
import { deserializeError, TroupeError } from "../errors.ts";
import type { CompiledModules } from "../loader/compile-modules.ts";
import type {
  CreateRunCommand,
  ShardReplies,
  ShardRequest,
  ToShard,
  FromShard,
  GraphSpecLite,
  RunDone,
  ShardTask,
  StoreIndexOptions,
  StoreTtlOptions,
} from "../bridge/messages.ts";
import type { RunRecord } from "../storage/records.ts";
import { RunHub, type RunStreams } from "./run-hub.ts";
import type { ThreadStreamMode, ThreadStreams } from "./thread-stream-hub.ts";
import type { RemoteThreadStream } from "./remote-threads.ts";
import type { ThreadProtocolSessions } from "./thread-protocol-hub.ts";
import { shardOf } from "../bridge/sharding.ts";
import { createIdleBoard } from "../util/idle-gc.ts";
import { RUNTIME_DEFAULTS } from "../config/runtime-defaults.ts";
import { createShardMetricsBuffer, ShardMetricsReader, ShardMetricsWriter } from "../bridge/shard-metrics.ts";
import { componentLog, logOptions, type LogOptions } from "../log/logger.ts";

const log = componentLog("shard-pool");

export interface ShardPoolOptions {
  /** URL of the compiled actor worker entry (src/loader/runtime-modules.ts) */
  workerEntry: string;
  /** the user's compiled graph / embed modules */
  modules: CompiledModules;
  dataDir: string;
  /** the server's PostgreSQL (`--database-uri`); absent: LMDB in dataDir */
  databaseUri?: string;
  /** `--sync-commits` */
  syncCommits?: boolean;
  /** the server's cluster node id (Postgres) */
  nodeId?: string;
  /** a cluster node's pool (ClusterShardPool, cluster-pool.ts): shards recover threads as their leases are taken */
  cluster?: boolean;
  graphs: GraphSpecLite[];
  env: Record<string, string>;
  storeTtl?: StoreTtlOptions;
  storeIndex?: StoreIndexOptions;
  workers?: number;
  /** each actor worker's V8 young generation, MB (src/server/actor-workers.ts: 24 unless given) */
  youngGenerationMb?: number;
  /** gives each shard a direct port to the webhook worker (absent: webhooks are disabled) */
  webhookPortFor?: () => MessagePort | null;
  /**
   * Called before the replies and run ends of a batch from a shard are handled. The HTTP thread
   * reads LMDB through a read snapshot that lmdb-js renews only on a timer (>= 1 ms later): a read
   * right after a worker's reply could miss the commit that reply reports. Resetting the snapshot
   * here gives read-your-writes (seen in CI: a thread re-created by the worker read as missing).
   */
  onShardMessages?: () => void;
  /** the structured log's level and format, for the workers */
  log?: LogOptions;
}

interface Pending {
  resolve(v: unknown): void;
  reject(e: unknown): void;
}

interface Shard {
  index: number;
  port: MessagePort;
  task: Promise<unknown>;
  pending: Map<number, Pending>;
  dead: boolean;
}

/** A command's reply lost with its shard: the worker died (and restarts) while the command was in it. */
export class ShardDiedError extends TroupeError {
  constructor() {
    super("UNAVAILABLE", "The worker handling this thread restarted; retry the request");
  }
}

export class ShardPool {
  protected readonly hub = new RunHub();
  /** run streams: waiting for runs, reading their events (/wait, /join, streams, A2A, MCP) */
  get runs(): RunStreams {
    return this.hub;
  }
  /** GET /threads/{t}/stream listeners */
  readonly threadStreams: ThreadStreams = this.hub.threads;
  /** thread-centric protocol sessions (docs/THREAD_PROTOCOL.md) */
  readonly sessions: ThreadProtocolSessions = this.hub.protocol;
  readonly size: number;
  /** idle board of the server's threads: slot 0 is the thread that owns the pool, shard i has slot i + 1 */
  readonly idleBoard: SharedArrayBuffer;
  /** run metrics the shards publish (src/bridge/shard-metrics.ts), read by /metrics */
  readonly metrics: ShardMetricsReader;
  private readonly metricsBoard: SharedArrayBuffer;
  private readonly pool: Piscina;
  private readonly shards: Shard[] = [];
  private nextReqId = 1;
  protected closing = false;

  constructor(private readonly opts: ShardPoolOptions) {
    this.size = Math.max(1, opts.workers ?? availableParallelism());
    this.idleBoard = createIdleBoard(this.size + 1);
    const graphIds = opts.graphs.map((g) => g.graphId);
    this.metricsBoard = createShardMetricsBuffer(this.size, graphIds);
    this.metrics = new ShardMetricsReader(this.metricsBoard, this.size, graphIds);
    this.pool = new Piscina({
      filename: opts.workerEntry,
      // compiled code: stack traces point into the .ts sources through the linked source maps
      execArgv: ["--enable-source-maps"],
      minThreads: this.size,
      maxThreads: this.size,
      concurrentTasksPerWorker: 1,
      idleTimeout: Number.POSITIVE_INFINITY,
      maxQueue: this.size * 2,
      // young generation: by backend (actorWorkerYoungGenerationMb), 24 MB (8 MB semi-spaces, not
      // V8's 16) on LMDB: once grown under load a worker's new space stays resident until idle
      resourceLimits: { maxOldGenerationSizeMb: 4096, maxYoungGenerationSizeMb: opts.youngGenerationMb ?? 24 },
    });
    for (let i = 0; i < this.size; i++) this.shards.push(this.startShard(i));
  }

  private readonly restarts: number[] = [];

  /** whether shard i is up (not restarting after a crash) */
  shardAlive(index: number): boolean {
    return !this.shards[index]?.dead;
  }

  private startShard(index: number): Shard {
    const { port1, port2 } = new MessageChannel();
    const webhookPort = this.opts.webhookPortFor?.() ?? null;
    const task: ShardTask = {
      shardIndex: index,
      shardCount: this.size,
      port: port2 as unknown as ShardTask["port"],
      webhookPort: webhookPort as unknown as ShardTask["webhookPort"],
      dataDir: this.opts.dataDir,
      databaseUri: this.opts.databaseUri,
      syncCommits: this.opts.syncCommits,
      nodeId: this.opts.nodeId,
      cluster: this.opts.cluster,
      graphs: this.opts.graphs,
      env: this.opts.env,
      storeTtl: this.opts.storeTtl,
      storeIndex: this.opts.storeIndex,
      modules: this.opts.modules,
      idleBoard: { buffer: this.idleBoard, slot: index + 1 },
      metricsBoard: this.metricsBoard,
      log: this.opts.log ?? logOptions(),
    };
    const transferList = webhookPort ? [port2, webhookPort] : [port2];
    const shard: Shard = {
      index,
      port: port1,
      pending: new Map(),
      dead: false,
      task: this.pool.run(task, { transferList: transferList as never }),
    };
    port1.on("message", (batch: FromShard[]) => this.onMessages(shard, batch));
    shard.task.then(
      () => undefined,
      (err: unknown) => {
        if (this.closing) return;
        shard.dead = true;
        Atomics.store(new Int32Array(this.idleBoard), index + 1, 0); // its last sample must not hold the others back
        new ShardMetricsWriter(this.metricsBoard, index, this.metrics.graphIds).clearGauges(); // its queue is gone with it (counters stay)
        log.error("actor shard died; restarting", { shard: index, err });
        this.failPending(shard, new ShardDiedError());
        this.shardDied(index);
        port1.close();
        // back off when a shard keeps dying at startup (e.g. a graph that crashes the worker)
        const n = (this.restarts[index] = (this.restarts[index] ?? 0) + 1);
        setTimeout(
          () => {
            if (!this.closing) this.shards[index] = this.startShard(index);
          },
          Math.min(100 * 2 ** (n - 1), 10_000),
        ).unref();
        setTimeout(() => (this.restarts[index] = 0), 60_000).unref();
      },
    );
    return shard;
  }

  private failPending(shard: Shard, err: unknown): void {
    for (const p of shard.pending.values()) p.reject(err);
    shard.pending.clear();
  }

  private onMessages(shard: Shard, batch: FromShard[]): void {
    this.opts.onShardMessages?.();
    for (const m of batch) {
      switch (m.type) {
        case "reply": {
          trace?.(`pool.reply ${m.reqId}`);
          const p = shard.pending.get(m.reqId);
          if (!p) break;
          shard.pending.delete(m.reqId);
          if (m.ok) p.resolve(m.value);
          else p.reject(deserializeError(m.error));
          break;
        }
        case "run.start":
          this.hub.started(m.runId, m.threadId, m.resumable, m.attempt, m.protocol);
          break;
        case "run.events":
          this.hub.events(m.runId, m.events);
          break;
        case "run.done":
          trace?.(`pool.run.done`);
          this.hub.finished(m.done);
          break;
        case "thread.idle": // cluster shards only
          this.threadIdle(m.threadId);
          break;
        case "thread.refused": // cluster shards only
          this.threadRefused(m.threadId, m.epoch);
          break;
      }
    }
  }

  /** Send a command to the actor of its thread (or, for graph.describe, to a shard by assistant id). */
  request<C extends ShardRequest>(cmd: C): Promise<ShardReplies[C["type"]]> {
    if (this.closing) return Promise.reject(new TroupeError("UNAVAILABLE", "Server is shutting down"));
    const key = cmd.type === "graph.describe" ? cmd.assistant.assistant_id : cmd.threadId;
    const shard = this.shards[shardOf(key, this.size)];
    if (shard.dead) return Promise.reject(new TroupeError("UNAVAILABLE", "The worker handling this thread is restarting; retry the request"));
    const reqId = this.nextReqId++;
    return new Promise((resolve, reject) => {
      shard.pending.set(reqId, { resolve: resolve as (v: unknown) => void, reject });
      trace?.(`pool.post ${reqId} ${cmd.type}`);
      shard.port.postMessage({ type: "request", reqId, cmd } satisfies ToShard);
    });
  }

  /**
   * Creates a run and registers it with the run hub. A run whose events stay in its worker
   * (`observed: false`) is observed at once, with what its worker buffered, when a thread stream
   * already listens on its thread: that stream may have connected while this create was in flight,
   * too late for the hub to list the run among the thread's held runs.
   */
  async createRun(cmd: CreateRunCommand): Promise<RunRecord> {
    const run = await this.request(cmd);
    this.created(cmd, run);
    return run;
  }

  /** A run was created on this node's shard, or (cluster) on its thread's owner: the hub expects it. */
  protected created(cmd: CreateRunCommand, run: RunRecord): void {
    this.hub.expect(run.run_id, run.thread_id, run.kwargs.resumable, cmd.observed);
    if (!cmd.observed && this.hub.threads.has(run.thread_id)) {
      // a thread stream connected while the create was in flight: fetch the run's events, and keep
      // its run_end for thread streams until they are in (the run may end before the fetch lands)
      const held = this.hub.holdThreadEnd(run.run_id);
      void this.observeRun(run.thread_id, run.run_id, true)
        .catch(() => undefined)
        .finally(() => held && this.hub.releaseThreadEnd(run.run_id));
    }
  }

  /**
   * Before a client listens to a thread's stream or protocol session: a cluster node makes the
   * thread's runs on other nodes reach it (remote-threads.ts). One node: nothing to do.
   */
  watchThread(_threadId: string): Promise<void> {
    return Promise.resolve();
  }

  /**
   * A command for the thread is about to come (a run create, once its request is checked): a
   * cluster node starts taking the thread's lease now, alongside that work. One node: nothing.
   */
  prepareThread(_threadId: string): void {}

  /**
   * A thread stream resumed with a Last-Event-ID another cluster node gave out: served by that
   * node (remote-threads.ts), undefined when it cannot be (one node: always).
   */
  threadStreamFrom(_threadId: string, _after: number, _modes: ReadonlySet<ThreadStreamMode>): Promise<RemoteThreadStream | undefined> {
    return Promise.resolve(undefined);
  }

  /** Cluster: a shard dropped the thread's idle actor (ClusterShardPool lets its lease linger, then releases it). */
  protected threadIdle(_threadId: string): void {}

  /** Cluster: a fenced write of the thread was refused (ClusterShardPool gives that holding up). */
  protected threadRefused(_threadId: string, _epoch: number): void {}

  /** Cluster: shard `index` died with its actors (ClusterShardPool hands its threads' leases over). */
  protected shardDied(_index: number): void {}

  /**
   * A finished run's output: from its run.done, or fetched from its worker, which keeps a large
   * output nobody awaited (run-outputs.ts). Undefined when neither has it any more.
   */
  async runOutput(done: RunDone): Promise<Uint8Array | undefined> {
    if (done.output !== undefined) return done.output;
    const reply = await this.request({ type: "run.output", threadId: done.threadId, runId: done.runId }).catch(() => undefined);
    return reply?.output ?? undefined;
  }

  /**
   * Deletes a thread with all its data, and ends the thread streams listening to it. `ifExpired`
   * (TTL sweeps): only if no run is running or queued and it was not updated since (false: kept).
   */
  async deleteThread(threadId: string, ifExpired?: { updatedAt: string }): Promise<boolean> {
    const { deleted } = await this.request({ type: "thread.delete", threadId, ...(ifExpired ? { ifExpired } : {}) });
    if (!deleted) return false;
    this.hub.threads.close(threadId);
    this.hub.protocol.close(threadId);
    return true;
  }

  /**
   * A reader joined a run whose events its worker keeps (see event-gate.ts): from now on they come
   * here live, preceded by what the worker buffered when `replay`. No-op for runs already observed.
   */
  async observeRun(threadId: string, runId: string, replay: boolean): Promise<void> {
    if (!this.hub.isGated(runId)) return;
    this.hub.markObserved(runId);
    await this.request({ type: "run.observe", threadId, runId, replay });
  }

  /** Drain: shards start no new runs and get graceMs to finish running ones (rollover, SIGTERM). */
  async close(graceMs: number = RUNTIME_DEFAULTS.shutdownGraceMs): Promise<void> {
    this.closing = true;
    for (const s of this.shards) s.port.postMessage({ type: "shutdown", graceMs } satisfies ToShard);
    await Promise.race([Promise.allSettled(this.shards.map((s) => s.task)), new Promise((r) => setTimeout(r, graceMs + 2_000))]);
    for (const s of this.shards) this.failPending(s, new TroupeError("UNAVAILABLE", "Server is shutting down"));
    await this.pool.destroy();
  }
}
