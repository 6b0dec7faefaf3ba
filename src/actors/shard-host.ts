// The body of one actor worker: hosts the thread actors whose ids hash to this shard, the graph
// registry and the checkpointer; speaks the messages of bridge/messages.ts over a MessagePort.
import { trace } from "../util/trace.ts";
import type { MessagePort } from "node:worker_threads";
import type { BaseStore } from "@langchain/langgraph-checkpoint";
import { serializeError, TroupeError } from "../errors.ts";
import { runCheckpointMetadata } from "./run-checkpoint-saver.ts";
import { useFastEnv } from "../util/fast-env.ts";
import { openStorage } from "../storage/open.ts";
import type { StoragePort } from "../storage/port.ts";
import type { ThreadRecord } from "../storage/records.ts";
import { GraphRegistry } from "./graph-registry.ts";
import { describeGraph } from "./graph-describe.ts";
import type { FromShard, ShardRequest, ShardTask, ToShard } from "../bridge/messages.ts";
import { recoverActiveRuns } from "./recovery.ts";
import { systemClock } from "../util/clock.ts";
import type { ShardContext } from "./shard-context.ts";
import { RunOutputs } from "./run-outputs.ts";
import { RunEventGates, type ProducedRunEvent } from "./event-gate.ts";
import { shardOf } from "../bridge/sharding.ts";
import { startProfilesFromEnv } from "../util/worker-profiles.ts";
import { startIdleGc } from "../util/idle-gc.ts";
import { useCompiledModules } from "../loader/user-modules.ts";
import { ThreadActor } from "./thread-actor.ts";
import type { WebhookDueMessage } from "../webhooks/messages.ts";
import { getHeapStatistics } from "node:v8";
import { ShardMetricsWriter } from "../bridge/shard-metrics.ts";
import { RunTelemetry } from "./run-telemetry.ts";
import { componentLog, configureLogging } from "../log/logger.ts";
import { registerGraphLogger } from "../log/graph-logger.ts";

export interface ShardHostOptions {
  /** builds the LangGraph store graphs see (shared with the /store routes) */
  createStore?: (storage: StoragePort) => Promise<BaseStore | undefined>;
}

/** How often a shard publishes its queue gauges and heap to the metrics board. */
const QUEUE_SNAPSHOT_MS = 1_000;

export async function runShardHost(task: ShardTask, opts: ShardHostOptions = {}): Promise<string> {
  configureLogging(task.log, `actor-${task.shardIndex}`);
  const shardLog = componentLog("shard");
  registerGraphLogger(); // before any graph module loads: getLogger() at import must find it
  const profiles = startProfilesFromEnv(process.env, `shard${task.shardIndex}`);
  const stopIdleGc = startIdleGc({ board: task.idleBoard });
  for (const [k, v] of Object.entries(task.env)) process.env[k] ??= v;
  useFastEnv();
  useCompiledModules(task.modules);
  const storage = await openStorage({ dataDir: task.dataDir, databaseUri: task.databaseUri, syncCommits: task.syncCommits, nodeId: task.nodeId });
  const savers = await storage.checkpoints.open();
  const saver = savers.saver({ putMetadata: runCheckpointMetadata });
  const store = await opts.createStore?.(storage);
  const registry = new GraphRegistry(task.graphs, {
    checkpointer: (serde) => (serde ? savers.saver({ serde, putMetadata: runCheckpointMetadata }) : saver),
    store,
  });
  const port = task.port as unknown as MessagePort;
  const webhookPort = task.webhookPort as unknown as MessagePort | null;

  // Outgoing messages are batched per microtask checkpoint: one postMessage carries what was
  // produced synchronously together (e.g. a reply plus the first events) without holding a reply
  // back until the graph yields to the event loop (setImmediate did: +7 ms per run).
  let outbox: FromShard[] = [];
  let flushScheduled = false;
  const flush = () => {
    flushScheduled = false;
    const batch = outbox;
    outbox = [];
    trace?.(`shard.post ${batch.map((m) => m.type + ("reqId" in m ? m.reqId : "")).join(",")}`);
    port.postMessage(batch);
  };
  const post = (msg: FromShard) => {
    outbox.push(msg);
    if (!flushScheduled) {
      flushScheduled = true;
      queueMicrotask(flush);
    }
  };
  const gates = new RunEventGates((runId, events) => post({ type: "run.events", runId, events }));
  const outputs = new RunOutputs();
  // consecutive events of one run coalesce into a single message
  const emit = (runId: string, produced: ProducedRunEvent) => {
    const event = gates.accept(runId, produced);
    if (event === undefined) return; // nobody reads this run yet: buffered in its gate
    const last = outbox[outbox.length - 1];
    if (last && last.type === "run.events" && last.runId === runId) last.events.push(event);
    else post({ type: "run.events", runId, events: [event] });
  };

  const actors = new Map<string, ThreadActor>();
  /**
   * cluster: thread records for actors not made yet, under the lease holding they were learnt in:
   * read as this node took the thread's lease (thread.recover), or known by an actor dropped idle
   * while the lease lingers here. Gone with the holding (thread.abandon: released, lost, refused).
   */
  const learnt = new Map<string, { record: ThreadRecord | undefined; epoch: number }>();
  const board = new ShardMetricsWriter(
    task.metricsBoard,
    task.shardIndex,
    task.graphs.map((g) => g.graphId),
  );
  const stopSnapshots = startQueueSnapshots(board, actors);
  const ctx: ShardContext = {
    draining: false,
    startBeforeCommit: storage.backend === "postgres",
    storage,
    registry,
    saver,
    clock: systemClock,
    post,
    runDone: (done, output) => {
      gates.done(done.runId, done.threadStatus !== "deleted");
      post({ type: "run.done", done: { ...done, output: outputs.ended(done.runId, output) } });
    },
    emit,
    webhooks: webhookPort !== null, // null: webhooks disabled (http.disable_webhooks)
    webhookDue: (threadId, runId) => {
      const due: WebhookDueMessage = { type: "webhook.due", threadId, runId };
      webhookPort?.postMessage(due);
    },
    maybeRelease: (actor) => {
      // drop idle actors on the next turn so a burst of commands reuses the same instance
      setImmediate(() => {
        if (!actor.idle || actors.get(actor.threadId) !== actor) return;
        actors.delete(actor.threadId);
        if (task.cluster !== true) return;
        // the lease lingers (fenced): the thread's next command within it starts from this record
        const held = actor.heldRecord;
        if (held !== undefined) learnt.set(actor.threadId, held);
        post({ type: "thread.idle", threadId: actor.threadId }); // its lease may go
      });
    },
    telemetry: new RunTelemetry(board),
    log: (m) => shardLog.error(m),
  };
  /** cluster: the thread's lease moved; its actor stops without writing (the new owner recovers its runs) */
  const abandonActor = (threadId: string): boolean => {
    const actor = actors.get(threadId);
    actor?.abandon();
    actors.delete(threadId);
    return actor !== undefined;
  };
  // a write refused by the fence: the lease moved before this node heard of it. The actor stops;
  // the thread's commands are refused (UNAVAILABLE: retried, then routed to the new owner) until
  // the pool, told now, drops the holding and abandons the thread here, or fences a new holding
  const refusedThreads = new Set<string>();
  storage.fences?.onRefused((threadId, epoch) => {
    // a late write of an older holding: the thread's current holding (and actor) are not concerned
    if (storage.fences?.epochOf(threadId) !== epoch) return;
    shardLog.warn("write refused by the thread's lease fence: its actor stops", { threadId });
    abandonActor(threadId);
    learnt.delete(threadId);
    refusedThreads.add(threadId);
    post({ type: "thread.refused", threadId, epoch });
  });
  const actorFor = (threadId: string): ThreadActor => {
    let a = actors.get(threadId);
    if (!a) {
      actors.set(threadId, (a = new ThreadActor(threadId, ctx)));
      const known = learnt.get(threadId);
      if (known !== undefined) {
        learnt.delete(threadId);
        a.learnThread(known.record, known.epoch);
      }
    }
    return a;
  };

  const reply = (reqId: number, p: Promise<unknown>) =>
    p.then(
      (value) => post({ type: "reply", reqId, ok: true, value }),
      (err: unknown) => {
        if (!(err instanceof TroupeError)) ctx.log(`request ${reqId} failed: ${(err as Error)?.stack ?? String(err)}`);
        post({ type: "reply", reqId, ok: false, error: serializeError(err) });
      },
    );

  const handle = (cmd: ShardRequest): Promise<unknown> => {
    if (cmd.type === "graph.describe") return describeGraph(registry, cmd);
    if (cmd.type === "run.observe") return Promise.resolve({ gated: gates.observe(cmd.runId, cmd.replay) });
    if (cmd.type === "run.output") return Promise.resolve({ output: outputs.bytesOf(cmd.runId) ?? null });
    if (cmd.type === "thread.recover") {
      refusedThreads.delete(cmd.threadId); // a new holding
      storage.fences?.fence(cmd.threadId, cmd.epoch); // before any write of the thread's runs
      // no root checkpoint as of the take: the first run's graph reads none without a statement
      if (cmd.noCheckpoints === true) saver.learnNoCheckpoints?.(cmd.threadId, cmd.epoch);
      if (cmd.thread !== undefined) {
        // its record as read after the take: the actor (now or when made) starts from it
        const record = cmd.thread ?? undefined;
        const actor = actors.get(cmd.threadId);
        if (actor !== undefined) actor.learnThread(record, cmd.epoch);
        else learnt.set(cmd.threadId, { record, epoch: cmd.epoch });
      }
      if (cmd.fenceOnly === true) return Promise.resolve({ runs: 0 });
      return recoverActiveRuns(storage.runs, () => true, actorFor, cmd.threadId).then((runs) => ({ runs }));
    }
    if (cmd.type === "thread.abandon") {
      refusedThreads.delete(cmd.threadId);
      learnt.delete(cmd.threadId);
      storage.fences?.unfence(cmd.threadId);
      return Promise.resolve({ abandoned: abandonActor(cmd.threadId) });
    }
    if (refusedThreads.has(cmd.threadId)) {
      // an actor made now would act on what this node no longer owns (e.g. answer a cancel "found")
      return Promise.reject(new TroupeError("UNAVAILABLE", `thread ${cmd.threadId}: this node no longer holds its lease; retry the request`));
    }
    if (cmd.type === "run.create") {
      gates.open(cmd.runId, cmd.observed);
      if (cmd.outputAwaited) outputs.await(cmd.runId);
    }
    const actor = actorFor(cmd.threadId);
    const p = actor.handle(cmd);
    if (cmd.type === "run.create") {
      // refused: no run, no events, no output
      p.catch(() => {
        gates.done(cmd.runId, false);
        outputs.refused(cmd.runId);
      });
    }
    void p.finally(() => ctx.maybeRelease(actor)).catch(() => undefined);
    return p;
  };

  // a cluster node recovers a thread when it takes its lease (thread.recover): the others' threads are theirs
  if (task.cluster !== true) await recoverActiveRuns(storage.runs, (threadId) => shardOf(threadId, task.shardCount) === task.shardIndex, actorFor);

  return new Promise<string>((resolve) => {
    port.on("message", (msg: ToShard) => {
      if (msg.type === "shutdown") {
        ctx.draining = true;
        const deadline = Date.now() + msg.graceMs;
        const finish = async () => {
          const busy = [...actors.values()].some((a) => a.running);
          if (busy && Date.now() < deadline) return void setTimeout(() => void finish(), 25);
          stopIdleGc();
          stopSnapshots();
          await profiles.stop().catch((err: unknown) => ctx.log(`worker profiles not written: ${String(err)}`));
          flush();
          port.close();
          // Runs still running past the grace period stay "running" in LMDB: the next server
          // resumes them from their last checkpoint. Closing LMDB under them would fail their writes.
          if (busy) resolve("stopped with runs in flight");
          else void storage.close().finally(() => resolve("stopped"));
        };
        void finish();
        return;
      }
      trace?.(`shard.recv ${msg.reqId} ${msg.cmd.type}`);
      void reply(
        msg.reqId,
        Promise.resolve().then(() => handle(msg.cmd)),
      );
    });
  });
}

/**
 * Publishes the shard's queue (pending and running runs, when the pending ones became due) and
 * heap to the metrics board every QUEUE_SNAPSHOT_MS: a walk over the live actors, off every run's path.
 */
function startQueueSnapshots(board: ShardMetricsWriter, actors: ReadonlyMap<string, ThreadActor>): () => void {
  const snapshot = () => {
    const now = Date.now();
    let running = 0;
    let oldestUnblockedDue = Number.NaN;
    const pendingDue: number[] = [];
    for (const actor of actors.values()) {
      if (actor.executing) running++;
      const pending = actor.pendingRuns;
      for (const run of pending) pendingDue.push(Date.parse(run.created_at));
      if (!actor.executing && pending.length > 0) {
        const due = Date.parse(pending[0].created_at);
        if (due <= now && !(due >= oldestUnblockedDue)) oldestUnblockedDue = due;
      }
    }
    board.publishQueue({ pending: pendingDue.length, running, pendingDue, oldestUnblockedDue }, now);
    const heap = getHeapStatistics();
    board.publishHeap(heap.used_heap_size, heap.total_heap_size);
  };
  snapshot();
  const timer = setInterval(snapshot, QUEUE_SNAPSHOT_MS);
  timer.unref();
  return () => {
    clearInterval(timer);
    board.clearGauges();
  };
}
