// The chores a cluster runs on one node at a time (docs/CLUSTER.md "Singleton jobs"): the thread
// and store TTL sweeps, taking over the webhook deliveries of dead nodes, and the cluster's own
// cleanup. Each is a SingletonJob: whichever node holds its lock runs it, and it moves within
// seconds when that node dies. A single server runs the same sweeps on plain timers instead.
import { forgetDeadNodes } from "../cluster/nodes.ts";
import { SingletonJob } from "../cluster/singleton.ts";
import { databaseStamp } from "../cluster/time.ts";
import { DRAIN_BATCH, takeDeadNodesDeliveries, type TakenDelivery } from "../cluster/webhook-drain.ts";
import type { PostgresDb } from "../storage/postgres/pool.ts";

export interface PeriodicWork {
  /** one pass */
  run(): Promise<unknown>;
  everyMs: number;
}

export interface ClusterJobsOptions {
  db: PostgresDb;
  nodeId: string;
  /** the thread TTL sweep (ThreadTtlSweeper.sweep) */
  threadTtl?: PeriodicWork;
  /** the store TTL sweep; absent when the config turns it off */
  storeTtl?: PeriodicWork;
  /** this node's webhook worker; absent when webhooks are disabled */
  webhooks?: { take(deliveries: readonly TakenDelivery[]): void };
  /** removes expired bus payload rows (NotifyBus.cleanupPayloads) */
  cleanupPayloads(): Promise<unknown>;
  /** how often dead nodes' deliveries are looked for (default 5 s) */
  webhookDrainMs?: number;
  /** how often payloads and long-dead node rows are removed (default 30 s) */
  choresMs?: number;
  /** a dead node's row is kept this long for operators to see (default 1 h) */
  forgetNodesAfterMs?: number;
  /** how often a node not holding a job tries to take it (default 2 s) */
  retryMs?: number;
  onError(job: string, err: unknown): void;
}

export interface ClusterJobs {
  readonly jobs: readonly SingletonJob[];
  /** stops contending; held jobs are aborted and awaited, their locks released */
  stop(): Promise<void>;
}

export function startClusterJobs(o: ClusterJobsOptions): ClusterJobs {
  const jobs: SingletonJob[] = [];
  const add = (name: string, work: PeriodicWork, firstAfterMs = work.everyMs) => {
    const job = new SingletonJob(o.db, {
      name,
      retryMs: o.retryMs,
      run: periodic(work, firstAfterMs, (err) => o.onError(name, err)),
      onError: (err) => o.onError(name, err),
    });
    jobs.push(job);
  };
  if (o.threadTtl) add("thread-ttl", o.threadTtl);
  if (o.storeTtl) add("store-ttl", o.storeTtl);
  const webhooks = o.webhooks;
  if (webhooks) {
    const drain = async () => {
      for (;;) {
        const taken = await takeDeadNodesDeliveries(o.db, o.nodeId);
        webhooks.take(taken);
        if (taken.length < DRAIN_BATCH) return;
      }
    };
    add("webhook-drain", { run: drain, everyMs: o.webhookDrainMs ?? 5_000 }, 0);
  }
  const forgetAfterMs = o.forgetNodesAfterMs ?? 3_600_000;
  const chores = async () => {
    await o.cleanupPayloads();
    await forgetDeadNodes(o.db, { afterMs: forgetAfterMs, stamp: databaseStamp });
  };
  add("cluster-chores", { run: chores, everyMs: o.choresMs ?? 30_000 });
  for (const job of jobs) job.start();
  return {
    jobs,
    stop: async () => {
      await Promise.all(jobs.map((j) => j.stop()));
    },
  };
}

/** A job body: `work` every `everyMs` (the first after `firstAfterMs`) until the job is aborted; a failed pass is reported, not fatal. */
function periodic(work: PeriodicWork, firstAfterMs: number, report: (err: unknown) => void): (signal: AbortSignal) => Promise<void> {
  return async (signal) => {
    let wait = firstAfterMs;
    while (!signal.aborted) {
      await sleep(wait, signal);
      if (signal.aborted) return;
      try {
        await work.run();
      } catch (err) {
        report(err);
      }
      wait = work.everyMs;
    }
  };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    timer.unref();
    signal.addEventListener("abort", done, { once: true });
  });
}
