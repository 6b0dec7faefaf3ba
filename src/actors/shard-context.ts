// What a thread actor may use from the shard that hosts it.
import type { GraphRegistry } from "./graph-registry.ts";
import type { ProducedRunEvent } from "./event-gate.ts";
import type { FromShard, RunDone } from "../bridge/messages.ts";
import type { RunOutput } from "./run-outputs.ts";
import type { ThreadActor } from "./thread-actor.ts";
import type { StoragePort, ThreadCheckpointOps } from "../storage/port.ts";
import type { Clock } from "../util/clock.ts";
import type { RunTelemetry } from "./run-telemetry.ts";

export type { ThreadCheckpointOps };

export interface ShardContext {
  /** set on shutdown: actors start no new runs (queued ones stay in LMDB for the next server) */
  draining: boolean;
  /**
   * an unstreamed run on an idle thread starts when its create is issued, not when it commits
   * (ThreadActor.startBeforeCommit): on where a commit is a round trip (PostgreSQL). Off on LMDB,
   * whose batched local commits are cheaper to wait for: there the overlap cost 25–50% more CPU per
   * run at wait-c64 (bench/RESULTS.md, session 21)
   */
  startBeforeCommit: boolean;
  /** the thread and run records, the webhook outbox (the storage port) */
  storage: StoragePort;
  registry: GraphRegistry;
  saver: ThreadCheckpointOps;
  /** when queued runs with after_seconds become due */
  clock: Clock;
  post(msg: FromShard): void;
  /** a run ended: its run.done to the HTTP thread, with the output or (large, not awaited) keeping it here */
  runDone(done: Omit<RunDone, "output">, output: RunOutput): void;
  /** a run's event, to the HTTP thread or (nobody reads the run yet) its gate */
  emit(runId: string, event: ProducedRunEvent): void;
  /** runs' webhooks are recorded and delivered (false: http.disable_webhooks) */
  webhooks: boolean;
  /** a run's webhook delivery was committed to the outbox: tell the webhook worker */
  webhookDue(threadId: string, runId: string): void;
  maybeRelease(actor: ThreadActor): void;
  /** run start/end: log lines and the shard's run metrics */
  telemetry: RunTelemetry;
  log(message: string): void;
}
