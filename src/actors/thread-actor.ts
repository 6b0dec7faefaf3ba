// One actor per thread: it owns the thread's mailbox (commands run one at a time), its queue of
// pending runs and the run in flight. It is the only writer of its thread's records, so status
// changes never race. Runs execute here, inside an actor worker, never on the HTTP thread.
import { trace } from "../util/trace.ts";
import { TroupeError, checkpointNotFound, notFound, threadNotFound, runNotFound } from "../errors.ts";
import type { JsonObject, RunRecord, ThreadRecord, ThreadStatus, WebhookDeliveryRecord } from "../storage/records.ts";
import { nowIso } from "../storage/records.ts";
import { executeRun, type EmitFn, type RunOutcome } from "./run-executor.ts";
import { executeProtocolRun, ProtocolEventShaper, protocolEmitter } from "./thread-protocol-run.ts";
import {
  MAX_ATTEMPTS,
  mergeConfigs,
  mergeContexts,
  multitaskDecision,
  outcomeAfterStop,
  recoveryPlan,
  stopActionOf,
  stopToRecord,
  threadConfigAfter,
  threadStatusAfterRun,
  type StopAction,
} from "../domain/lifecycle.ts";
import type { ActorCommand, CreateRunCommand, ShardReplies } from "../bridge/messages.ts";
import type { ShardContext } from "./shard-context.ts";
import { EMPTY_STATE, currentState, readHistory, readState, stateConfig } from "./thread-state.ts";
import { asBadRequest } from "./graph-input-errors.ts";
import { jsonBytes, type JsonSegments } from "../bridge/json-segments.ts";
import { toJsonSegments, toJsonText, toPlain } from "./value-json.ts";
import { newWebhookDelivery } from "../webhooks/outbox.ts";
import type { AssistantCheck, QueuedStop, TakenLease } from "../storage/port.ts";

interface InFlight {
  /** the run's record as last written (or about to be: see execute): queued, then running, with a recorded stop */
  record: RunRecord;
  abort: AbortController;
  finished: Promise<void>;
  /** its outcome is being written (or its thread was deleted): a stop arriving now changes nothing */
  outcomeFixed: boolean;
  /** the write of its recorded stop: a later stop request replies only once it committed */
  stopRecorded?: Promise<unknown>;
  /** its thread was deleted while it ran (deleteThread): its record went with the thread */
  threadDeleted?: boolean;
  /** started before its create committed (startsNow): that create; its end waits for it */
  created?: Promise<unknown>;
  /** ...and it failed: the run ends writing and announcing nothing */
  createFailed?: boolean;
  /** names this execution to its checkpoint writes (PostgreSQL, or started before its create committed): refused for good if the create fails or the run is rolled back */
  execution?: string;
  /** its graph has ended (its outcome is known; its finish comes next) */
  executed?: boolean;
}

/** Numbers the executions of runs started before their create committed (InFlight.execution). */
let executions = 0;

/**
 * The thread record as this actor last wrote or read it (`record` undefined: no such thread), and
 * the lease holding it knew it under (cluster: the fence's epoch; none on a single LMDB server).
 */
interface KnownThread {
  record: ThreadRecord | undefined;
  epoch: number | undefined;
}

/** A queued run ended by a stop: what its commit writes, and what is announced after it (queuedStop). */
interface StoppedQueuedRun {
  run: RunRecord;
  delivery: WebhookDeliveryRecord | undefined;
  write: QueuedStop;
}

export class ThreadActor {
  private mailbox: Promise<unknown> = Promise.resolve();
  private pendingOps = 0;
  private readonly queue: RunRecord[] = [];
  private current: InFlight | undefined;
  /** cancels the wait for the queue head's after_seconds */
  private timer: (() => void) | undefined;
  /** the queued run the timer waits for (its after_seconds) */
  private timerFor: RunRecord | undefined;
  /** runs found running after a restart: they resume from their last checkpoint if they reached one */
  private readonly resumeAfterRestart = new Set<string>();
  /*
   * Enqueued run creates release the mailbox once their transaction is queued, not committed, so
   * a burst of creates on one thread commits in one lmdb-js batch instead of one commit each (and a
   * run's finish no longer waits behind them). Until it commits, such a run is in the queue but
   * not startable, and `known` holds the thread record its transaction will leave.
   */
  private readonly uncommittedRuns = new Set<RunRecord>();
  /** resolves (never rejects) once every create queued so far has committed or failed */
  private createsSettled: Promise<void> = Promise.resolve();
  /*
   * The thread record as stored once every write this actor issued commits: it is the only writer
   * of the record and of its runs (docs/STORAGE.md "The thread actor's record"), so a run's end
   * and the next write's `prev` need no read. Good only under the lease holding it was learnt in
   * (knownThread); a write that fails drops it (the next use reads storage).
   */
  private known: KnownThread | undefined;
  /*
   * A thread's next queued run starts once the previous run's final transaction is queued, not
   * when it commits (lmdb-js commits in queue order, so the next run's writes still land after
   * it; its first checkpoint read is answered from the pending writes, see storage/checkpoints/lmdb-saver.ts).
   * Until that commit, whatever this actor sends to the HTTP thread waits here, so the previous
   * run's run.done still precedes the next run's start and events, as if they had not overlapped;
   * so does the next run's `running` record (its checkpoints wait in the saver: holdWritesUntil),
   * because lmdb-js keeps a transaction open while writes keep arriving.
   */
  private heldSends: (() => void)[] | undefined;
  /** runs whose final transaction is queued but not yet committed */
  private finishing = 0;
  /** cluster: the thread's lease moved to another node (abandon) */
  private abandoned = false;

  constructor(
    readonly threadId: string,
    private readonly ctx: ShardContext,
  ) {}

  get idle(): boolean {
    return !this.current && this.queue.length === 0 && this.pendingOps === 0 && !this.timer;
  }

  /**
   * Commands run strictly one after another, each after the previous one's commits; with
   * `afterCreates` false a command may start while enqueued creates are still committing (it
   * then reads the thread record as the latest create left it: known).
   */
  private serial<T>(fn: () => Promise<T> | T, afterCreates = true): Promise<T> {
    this.pendingOps++;
    // Start each command from a fresh read snapshot: the previous command's commit (or another
    // thread's) may have landed within this event-loop turn.
    const start = () => {
      this.ctx.storage.refreshReads();
      return fn();
    };
    const p = this.mailbox.then(() => (afterCreates && this.uncommittedRuns.size > 0 ? this.createsSettled.then(start) : start()));
    this.mailbox = p.then(
      () => this.pendingOps--,
      () => this.pendingOps--,
    );
    return p;
  }

  handle<C extends ActorCommand>(cmd: C): Promise<ShardReplies[C["type"]]> {
    const r = (() => {
      switch (cmd.type) {
        case "run.create":
          return this.serial(() => this.createRun(cmd), false).then((created) => created.committed);
        case "run.cancel":
          return this.cancel(cmd.runId, cmd.action, cmd.wait);
        case "run.delete":
          return this.serial(() => this.deleteRun(cmd.runId, cmd.keepCheckpoints === true));
        case "thread.create":
          return this.serial(() => this.createThread(cmd));
        case "thread.patch":
          return this.serial(() => this.patchThread(cmd.metadata));
        case "thread.patch_state":
          return this.serial(() => this.patchState(cmd.metadata, cmd.checkpointId));
        case "thread.delete":
          return this.serial(() => this.deleteThread(cmd.ifExpired));
        case "thread.copy":
          return this.serial(() => this.copyThread(cmd.newThreadId));
        case "thread.prune_history":
          return this.serial(() => this.pruneHistory());
        case "thread.state":
          return this.serial(() => this.state(cmd));
        case "thread.update_state":
          return this.serial(() => this.updateState(cmd));
        case "thread.history":
          return this.serial(() => this.history(cmd));
      }
    })();
    return r as Promise<ShardReplies[C["type"]]>;
  }

  // ---- threads -------------------------------------------------------------------------

  private async getThread(): Promise<ThreadRecord> {
    const t = await this.threadRecord();
    if (!t) throw threadNotFound(this.threadId);
    return t;
  }

  /** the epoch of this node's lease holding of the thread (cluster), undefined without one */
  private epoch(): number | undefined {
    return this.ctx.storage.fences?.epochOf(this.threadId);
  }

  /**
   * The known record while it is good: always on a single server (no fences); in a cluster only
   * under the same lease holding (the same epoch) it was learnt in, never unfenced (a thread
   * created here without a lease may be written by the node that takes it) nor in a later tenure.
   */
  private knownThread(): KnownThread | undefined {
    const k = this.known;
    if (k === undefined || this.ctx.storage.fences === undefined) return k;
    if (k.epoch !== undefined && k.epoch === this.epoch()) return k;
    this.known = undefined;
    return undefined;
  }

  /**
   * Cluster: the thread's record as read right after this node took its lease under `epoch`
   * (thread.recover): known from now, so the first command needs no read. Ignored unless that is
   * the thread's holding now (a later take, or an abandon, made it stale).
   */
  learnThread(record: ThreadRecord | undefined, epoch: number): void {
    if (this.epoch() !== epoch) return;
    this.known = { record, epoch };
  }

  /**
   * Cluster: the record as known under the thread's lease holding now (undefined: none known, or
   * not under a holding). The shard keeps it when it drops this actor idle while the lease lingers,
   * so the thread's next actor starts from it (learnThread) instead of reading it.
   */
  get heldRecord(): { record: ThreadRecord | undefined; epoch: number } | undefined {
    const k = this.knownThread();
    return k?.epoch === undefined ? undefined : { record: k.record, epoch: k.epoch };
  }

  /** The thread record as stored (undefined: no thread): the known one, else read (and known from then). */
  private async threadRecord(): Promise<ThreadRecord | undefined> {
    const k = this.knownThread();
    if (k !== undefined) return k.record;
    const epoch = this.epoch();
    const record = await this.ctx.storage.threads.get(this.threadId);
    this.known ??= { record, epoch }; // (a write issued meanwhile knows better)
    return record;
  }

  /** `write` leaves the thread record as `record` (undefined: deleted): known from now; its failure forgets it. */
  private remember<T>(record: ThreadRecord | undefined, write: Promise<T>): Promise<T> {
    this.known = { record, epoch: this.epoch() };
    return this.forgetOnFailure(write);
  }

  /** A write of the thread that failed (refused by the lease fence, a failed commit): the record is read again next time. */
  private forgetOnFailure<T>(write: Promise<T>): Promise<T> {
    const k = this.known;
    write.catch(() => {
      if (this.known === k) this.known = undefined;
    });
    return write;
  }

  private async createThread(cmd: Extract<ActorCommand, { type: "thread.create" }>): Promise<ThreadRecord & { taken?: TakenLease }> {
    const now = nowIso();
    const thread: ThreadRecord = { thread_id: this.threadId, created_at: now, updated_at: now, metadata: cmd.metadata, status: "idle", config: {} };
    if (cmd.supersteps?.length) {
      const existing = await this.threadRecord();
      if (existing) return existingThread(existing, cmd.ifExists);
      const graphId = cmd.metadata.graph_id as string | undefined;
      if (!graphId || !this.ctx.registry.has(graphId)) {
        throw new TroupeError(
          "BAD_REQUEST",
          `Thread ${this.threadId} has no graph ID: pass metadata.graph_id (or graph_id) naming a registered graph to apply supersteps`,
        );
      }
      const graph = await this.ctx.registry.get(graphId, stateConfig(thread), { accessContext: "threads.update" });
      const lib = await this.ctx.registry.lib(graphId);
      const steps = cmd.supersteps.map((s) => ({
        updates: s.updates.map((u) => ({
          values: u.command ? undefined : u.values,
          asNode: u.as_node,
          ...(u.command ? { values: new lib.Command(u.command as Record<string, unknown>) } : {}),
        })),
      }));
      if (!graph.bulkUpdateState) throw new TroupeError("BAD_REQUEST", "This graph's LangGraph version does not support supersteps");
      await asBadRequest(() => graph.bulkUpdateState!(stateConfig(thread), steps));
      const snap = await graph.getState(stateConfig(thread));
      await this.remember(thread, this.ctx.storage.threads.save(thread, toJsonText(snap.values), undefined));
      return thread;
    }
    // the create checks the id in its own commit: no read first
    const epoch = this.epoch();
    const threads = this.ctx.storage.threads;
    const take = epoch === undefined && threads.createTaking !== undefined ? cmd.take : undefined;
    const created = await this.forgetOnFailure<ThreadRecord | TakenLease | undefined | "exists">(
      take === undefined ? threads.create(thread) : threads.createTaking!(thread, take),
    );
    if (created === "exists") {
      this.known = undefined;
      return existingThread(await this.getThread(), cmd.ifExists);
    }
    if (take !== undefined && created !== undefined) return this.tookLease(thread, created as TakenLease);
    this.known = { record: thread, epoch };
    return thread;
  }

  /**
   * Cluster: the create took the thread's lease (createTaking): its writes are fenced by that
   * holding from now on (as thread.recover fences a take), and the record and "no checkpoint" are
   * known under it, so the thread's first run reads neither. The HTTP thread holds the lease.
   */
  private tookLease(thread: ThreadRecord, taken: TakenLease): ThreadRecord & { taken: TakenLease } {
    this.ctx.storage.fences?.fence(this.threadId, taken.epoch);
    this.known = { record: thread, epoch: taken.epoch };
    if (taken.noCheckpoints) this.ctx.saver.learnNoCheckpoints?.(this.threadId, taken.epoch);
    return { ...thread, taken };
  }

  private async patchThread(metadata: JsonObject): Promise<ThreadRecord> {
    const t = await this.getThread();
    const next: ThreadRecord = { ...t, metadata: { ...t.metadata, ...metadata }, updated_at: nowIso() };
    await this.remember(next, this.ctx.storage.threads.save(next, undefined, t));
    return next;
  }

  private async patchState(metadata: JsonObject, checkpointId?: string): Promise<{ patched: boolean }> {
    await this.getThread();
    const patched = await this.ctx.saver.patchMetadata(this.threadId, metadata, checkpointId);
    if (!patched) throw notFound(`Thread ${this.threadId} has no checkpoint${checkpointId ? ` ${checkpointId}` : ""} to patch`);
    return { patched };
  }

  private async deleteThread(ifExpired?: { updatedAt: string }): Promise<{ deleted: boolean }> {
    const t = await this.getThread();
    if (ifExpired && (this.current || this.queue.length > 0 || t.status === "busy" || t.updated_at !== ifExpired.updatedAt)) return { deleted: false };
    const endedAt = nowIso();
    for (const run of [...this.queue]) {
      run.status = "interrupted";
      this.ctx.telemetry.ended({ ...run, updated_at: endedAt, ended_at: endedAt });
    }
    this.queue.length = 0;
    if (this.current) {
      this.current.outcomeFixed = true; // its records go with the thread: a later cancel must not write them back
      this.current.threadDeleted = true;
      this.current.abort.abort("interrupt");
    }
    await this.remember(undefined, this.ctx.storage.threads.delete(this.threadId));
    await this.ctx.saver.deleteThread(this.threadId);
    return { deleted: true };
  }

  /** keep_latest: a thread with a run queued or in flight is left alone (its checkpoints are in use). */
  private async pruneHistory(): Promise<{ pruned: boolean }> {
    await this.getThread();
    if (this.current || this.queue.length > 0) return { pruned: false };
    await this.ctx.saver.pruneToLatest(this.threadId);
    return { pruned: true };
  }

  private async copyThread(newThreadId: string): Promise<ThreadRecord> {
    const t = await this.getThread();
    const now = nowIso();
    const copy: ThreadRecord = {
      thread_id: newThreadId,
      created_at: now,
      updated_at: now,
      metadata: { ...t.metadata, thread_id: newThreadId },
      status: "idle",
      config: {},
    };
    await this.ctx.saver.copyThread(this.threadId, newThreadId);
    await this.ctx.storage.threads.save(copy, await this.ctx.storage.threads.valuesJson(this.threadId), undefined);
    return copy;
  }

  private graphIdOf(t: ThreadRecord, fallback?: { graph_id: string }): string | undefined {
    const g = (t.metadata.graph_id as string | undefined) ?? fallback?.graph_id;
    return g && this.ctx.registry.has(g) ? g : undefined;
  }

  private async state(cmd: Extract<ActorCommand, { type: "thread.state" }>): Promise<JsonObject> {
    const t = await this.getThread();
    const graphId = this.graphIdOf(t, cmd.assistant);
    if (!graphId) return EMPTY_STATE;
    const graph = await this.ctx.registry.get(graphId, stateConfig(t), { accessContext: "threads.read" });
    return readState(graph, t, cmd.checkpoint, cmd.subgraphs);
  }

  private async history(cmd: Extract<ActorCommand, { type: "thread.history" }>): Promise<JsonObject[]> {
    const t = await this.getThread();
    const graphId = this.graphIdOf(t, cmd.assistant);
    if (!graphId) return [];
    const graph = await this.ctx.registry.get(graphId, stateConfig(t), { accessContext: "threads.read" });
    return readHistory(graph, t, cmd);
  }

  private async updateState(cmd: Extract<ActorCommand, { type: "thread.update_state" }>): Promise<{ checkpoint: JsonObject; configurable: JsonObject }> {
    const t = await this.getThread();
    if (this.current || this.queue.length) throw new TroupeError("THREAD_BUSY", "Thread is busy");
    const graphId = this.graphIdOf(t, cmd.assistant);
    if (!graphId) throw new TroupeError("BAD_REQUEST", `Thread ${this.threadId} has no graph ID`);
    const graph = await this.ctx.registry.get(graphId, stateConfig(t), { accessContext: "threads.update" });
    const cfg = await asBadRequest(() => graph.updateState(stateConfig(t, cmd.checkpoint), cmd.values, cmd.asNode), { inferredNode: cmd.asNode === undefined });
    const snap = await graph.getState(stateConfig(t));
    const next: ThreadRecord = { ...t, updated_at: nowIso() };
    await this.remember(next, this.ctx.storage.threads.save(next, toJsonText(snap.values), t));
    const c = (cfg as { configurable?: Record<string, unknown> }).configurable ?? {};
    // `checkpoint` is what RemoteGraph reads; the SDK types the reply as a config (`configurable`)
    const checkpoint = { thread_id: this.threadId, checkpoint_ns: (c.checkpoint_ns as string) ?? "", checkpoint_id: c.checkpoint_id as string };
    return { checkpoint, configurable: checkpoint };
  }

  // ---- runs ----------------------------------------------------------------------------

  /** Resolves once the serial part is done; `committed` once the run is stored (the reply). */
  private async createRun(cmd: CreateRunCommand): Promise<{ committed: Promise<RunRecord> }> {
    const s = this.ctx.storage;
    // a run from a checkpoint the thread does not have would start from an empty state (and
    // become the thread's latest): refuse it instead
    const from = cmd.kwargs.config.configurable ?? {};
    if (typeof from.checkpoint_id === "string") {
      const ns = typeof from.checkpoint_ns === "string" ? from.checkpoint_ns : "";
      if (!(await this.ctx.saver.hasCheckpoint(this.threadId, ns, from.checkpoint_id))) {
        throw checkpointNotFound(from.checkpoint_id, this.threadId);
      }
    }
    const inflight = !!this.current || this.queue.length > 0;
    const action = multitaskDecision(cmd.multitaskStrategy, inflight);
    if (action !== "none" && this.uncommittedRuns.size > 0) {
      // cancelling what is queued: let the queued creates land first
      await this.createsSettled;
      s.refreshReads();
    }
    const now = nowIso();
    const assistant = cmd.assistant;
    const prevThread = await this.threadRecord(); // what this create's thread record replaces (none: it makes the thread)
    let thread = prevThread;
    const bound = thread?.metadata.assistant_id;
    if (cmd.requireBoundAssistant && typeof bound === "string" && bound !== assistant.assistant_id) {
      throw new TroupeError("BAD_REQUEST", `Thread ${this.threadId} is bound to assistant ${bound}; start runs on it with that assistant`);
    }
    const runConfig = cmd.kwargs.config;
    if (!thread) {
      if (!cmd.stateless && cmd.ifNotExists !== "create") throw threadNotFound(this.threadId);
      thread = {
        thread_id: this.threadId,
        created_at: now,
        updated_at: now,
        metadata: { graph_id: assistant.graph_id, assistant_id: assistant.assistant_id, ...cmd.metadata },
        status: "busy",
        config: {},
      };
    }
    const configurable = {
      ...(assistant.config.configurable ?? {}),
      // (threadConfigAfter: a thread stored by an older version may still carry a checkpoint address)
      ...(threadConfigAfter(thread.config).configurable ?? {}),
      ...(runConfig.configurable ?? {}),
      run_id: cmd.runId,
      thread_id: this.threadId,
      graph_id: assistant.graph_id,
      assistant_id: assistant.assistant_id,
    };
    const metadata = { ...assistant.metadata, ...thread.metadata, ...cmd.metadata };
    // as upstream, the stored config carries the run's metadata too (the graph's config.metadata is built from it)
    const config = { ...mergeConfigs(assistant.config, runConfig), configurable, metadata };
    const context = mergeContexts(assistant.context, cmd.kwargs.context);
    const created = new Date(this.ctx.clock.now() + Math.max(0, cmd.afterSeconds) * 1000).toISOString();
    const run: RunRecord = {
      run_id: cmd.runId,
      thread_id: this.threadId,
      assistant_id: assistant.assistant_id,
      metadata,
      status: "pending",
      kwargs: { ...cmd.kwargs, config, ...(context === undefined ? {} : { context }) },
      multitask_strategy: cmd.multitaskStrategy,
      created_at: created,
      updated_at: now,
      graph_id: assistant.graph_id,
      attempt: 0,
      on_completion: cmd.stateless ? cmd.onCompletion : undefined,
    };
    const nextThread: ThreadRecord = {
      ...thread,
      metadata: { ...thread.metadata, graph_id: assistant.graph_id, assistant_id: assistant.assistant_id },
      config: threadConfigAfter(thread.config, assistant.config, runConfig),
      status: "busy",
      updated_at: now,
    };
    if (action !== "none") {
      // the mailbox stays held until it commits: what comes next sees the superseded runs ended
      const created = await this.createSuperseding(run, nextThread, prevThread, action === "cancel-rollback" ? "rollback" : "interrupt", cmd.assistantCheck);
      return { committed: Promise.resolve(created) };
    }
    // A run nobody streams from its start (/wait, a background run) on a thread with nothing else
    // in flight starts now (where commits are round trips: ctx.startBeforeCommit), not once its create commits: it is stored already running, its writes
    // commit after the create (the thread's write order), what it sends waits for that commit, and
    // a failed create fails its checkpoint writes (holdWritesUntil's refusal) and it ends unseen.
    const startsNow = this.ctx.startBeforeCommit && !cmd.observed && this.startableNow(run);
    const running: RunRecord | undefined = startsNow ? { ...run, status: "running", attempt: run.attempt + 1, started_at: now } : undefined;
    // issued now, committed later (LMDB: one lmdb-js batch; a burst of creates commits together)
    trace?.("actor.create.issue");
    const stored = this.remember(
      nextThread,
      s.runs.create({ run: running ?? run, thread: nextThread, prev: prevThread, assistant: cmd.assistantCheck }).committed,
    );
    this.uncommittedRuns.add(run);
    const early = running && this.startBeforeCommit(running, stored);
    if (!early) this.insertQueued(run);
    const settle = () => this.uncommittedRuns.delete(run);
    const committed = stored.then(
      () => {
        trace?.("actor.create.committed");
        settle();
        early?.committed();
        this.pump();
        return run;
      },
      async (err: unknown) => {
        settle();
        const i = this.queue.indexOf(run);
        if (i >= 0) this.queue.splice(i, 1);
        early?.failed();
        this.pump();
        // answered once the run started early has unwound and the thread's writes are no longer
        // refused (holdWritesUntil lifts that as it ends, in a reaction of its own: hence the turn):
        // the answer may be retried at once (ASSISTANT_CHANGED), and must find the thread idle
        if (early) await early.ended.then(() => new Promise((resolve) => setImmediate(resolve)));
        throw err;
      },
    );
    // lmdb-js commits in queue order: the latest create settling means every earlier one did
    this.createsSettled = committed.then(
      () => undefined,
      () => undefined,
    );
    return { committed };
  }

  /**
   * A run created with multitask_strategy interrupt/rollback while others are in flight: one
   * transaction stores it and stops the others (the queued ones end at once; the running one is
   * marked with the stop, see markStop), so its reply promises nothing a crash could undo.
   */
  private async createSuperseding(
    run: RunRecord,
    nextThread: ThreadRecord,
    prevThread: ThreadRecord | undefined,
    stop: StopAction,
    assistant: AssistantCheck | undefined,
  ): Promise<RunRecord> {
    const s = this.ctx.storage;
    const now = nowIso();
    // taken in the same turn as the batch: from here no superseded run can start or end unnoticed
    const superseded = this.queue.splice(0);
    const running = this.current;
    const runningBefore = running?.record;
    const runningStopped = running && this.markStop(running, stop);
    const stopped = superseded.map((queued) => this.queuedStop(queued, stop, now));
    const stored = this.remember(
      nextThread,
      s.runs.create({ run, thread: nextThread, prev: prevThread, running: runningStopped, stopped: stopped.map((e) => e.write), assistant }).committed,
    );
    if (running && runningStopped) running.stopRecorded = stored;
    try {
      await stored;
    } catch (err) {
      for (const queued of superseded) this.insertQueued(queued);
      if (running && runningBefore) running.record = runningBefore;
      this.pump();
      throw err;
    }
    this.insertQueued(run);
    for (const ended of stopped) this.announceQueuedStopped(ended, "busy");
    running?.abort.abort(stop);
    this.pump();
    return run;
  }

  private insertQueued(run: RunRecord): void {
    let i = this.queue.length;
    while (i > 0 && this.queue[i - 1].created_at > run.created_at) i--;
    this.queue.splice(i, 0, run);
  }

  /** Re-admit runs found pending/running in storage after a restart (lifecycle.ts recoveryPlan). */
  recover(runs: RunRecord[]): void {
    for (const run of runs) {
      // a cluster node taking a thread back that it still had in memory: those runs are here already
      if (this.current?.record.run_id === run.run_id || this.queue.some((q) => q.run_id === run.run_id)) continue;
      switch (recoveryPlan(run)) {
        case "give-up": {
          const error = { error: "RunRecoveryError", message: `Run ${run.run_id} exceeded max attempts (${MAX_ATTEMPTS}) after server restarts` };
          void this.serial(() => this.finish({ ...run }, { status: "error", rolledBack: false, error }, isTemporary(run)));
          continue;
        }
        case "resume":
          // a run that already checkpointed resumes from its last checkpoint instead of replaying its
          // input (decided when it starts; its record keeps the input it was accepted with)
          run.status = "pending";
          this.resumeAfterRestart.add(run.run_id);
          break;
        case "stop": // its turn comes first (queue order): execute() ends it as its stop says, without running it
        case "requeue":
          // (a pending run that left checkpoints, e.g. one never stored running, see execute, is
          // resumed by LangGraph itself: the latest checkpoint carries its run id)
          break;
      }
      this.insertQueued(run);
    }
    this.pump();
  }

  /**
   * Cluster: this node lost the thread's lease (docs/CLUSTER.md). The run in flight is aborted and
   * ends without writing its outcome, queued runs are forgotten here, nothing starts any more: the
   * node now holding the lease recovers them from storage.
   */
  abandon(): void {
    this.abandoned = true;
    this.known = undefined;
    this.queue.length = 0;
    this.timer?.();
    this.timer = undefined;
    this.current?.abort.abort("interrupt");
  }

  /** pending runs, oldest first (the shard's queue snapshot for /metrics) */
  get pendingRuns(): readonly RunRecord[] {
    return this.queue;
  }

  /** whether a run of this thread executes now */
  get executing(): boolean {
    return this.current !== undefined;
  }

  /** runs whose graph has ended and whose outcome is not yet committed */
  get finishingRuns(): number {
    return this.finishing;
  }

  /** whether a run executes or has not yet committed its outcome */
  get running(): boolean {
    return this.current !== undefined || this.finishing > 0;
  }

  /** Sends to the HTTP thread (or webhook worker), or writes, now or after the commit that holds them back. */
  private send(deliver: () => void): void {
    if (this.heldSends !== undefined) this.heldSends.push(deliver);
    else deliver();
  }

  private pump(): void {
    if (this.timer && this.timerFor !== this.queue[0]) {
      // the head changed (a run due earlier came in, or the delayed one was cancelled): re-arm
      this.timer();
      this.timer = undefined;
    }
    if (this.current || this.queue.length === 0 || this.timer || this.ctx.draining || this.abandoned) return;
    const next = this.queue[0];
    if (this.uncommittedRuns.has(next)) return; // pumped again when its create commits
    const dueAt = Date.parse(next.created_at);
    if (dueAt > this.ctx.clock.now()) {
      this.timerFor = next;
      this.timer = this.ctx.clock.at(dueAt, () => {
        this.timer = undefined;
        this.pump();
      });
      return;
    }
    this.queue.shift();
    this.begin(next);
  }

  /** Whether a run just created can start at once (createRun: startsNow): nothing else of the thread is in flight. */
  private startableNow(run: RunRecord): boolean {
    return (
      !this.current &&
      this.queue.length === 0 &&
      !this.timer &&
      this.uncommittedRuns.size === 0 &&
      this.finishing === 0 &&
      this.heldSends === undefined &&
      !this.ctx.draining &&
      !this.abandoned &&
      Date.parse(run.created_at) <= this.ctx.clock.now()
    );
  }

  /**
   * Starts `running` (stored by the create `stored`, in flight) now. Until the create commits,
   * what the actor sends waits (the reply, run.start, events: the HTTP thread learns of the run in
   * that order, as when it starts after the commit) and its checkpoint writes wait in the saver;
   * if the create fails, those writes fail (none is written), the run is aborted and ends without
   * a write or a word (its create's error is the reply).
   */
  private startBeforeCommit(running: RunRecord, stored: Promise<unknown>): { committed(): void; failed(): void; ended: Promise<void> } {
    const held: (() => void)[] = (this.heldSends = []);
    const inflight = this.begin(running, stored);
    this.ctx.saver.holdWritesUntil(this.threadId, stored, inflight.finished);
    return {
      ended: inflight.finished,
      committed: () => this.releaseSends(held),
      failed: () => {
        if (this.heldSends === held) this.heldSends = undefined;
        held.length = 0;
        inflight.createFailed = true;
        inflight.outcomeFixed = true;
        if (inflight.execution !== undefined) this.ctx.saver.refuseExecution?.(inflight.execution);
        inflight.abort.abort("interrupt");
      },
    };
  }

  /** Makes `record` the run in flight and executes it (`created`: the create in flight that stores it running). */
  private begin(record: RunRecord, created?: Promise<unknown>): InFlight {
    let resolveFinished!: () => void;
    const finished = new Promise<void>((r) => (resolveFinished = r));
    const abort = new AbortController();
    const inflight: InFlight = { record, abort, finished, outcomeFixed: false, created };
    // named when its create may fail (started before it committed) or it may be rolled back: a
    // saver that can refuse an execution's late writes (PostgreSQL) gets a name for every run
    if (created !== undefined || this.ctx.saver.refuseExecution !== undefined) inflight.execution = `${record.run_id}/${++executions}`;
    this.current = inflight;
    // the next run may start once this one's outcome is queued; `finished` waits for its commit
    const makeWay = () => {
      if (this.current !== inflight) return;
      this.current = undefined;
      // on the next event-loop turn: lmdb-js hands a turn's writes to its write thread only when
      // the turn ends, so starting the next run in this one would hold this run's commit back
      setImmediate(() => this.pump());
    };
    void this.execute(inflight, makeWay, created !== undefined).finally(() => {
      makeWay();
      resolveFinished();
      this.ctx.maybeRelease(this);
    });
    return inflight;
  }

  private async execute(inflight: InFlight, outcomeQueued: () => void, stored: boolean): Promise<void> {
    const s = this.ctx.storage;
    const run = inflight.record;
    const { abort } = inflight;
    const stateless = isTemporary(run);
    // a run recovered after a restart resumes from its last checkpoint if the crashed attempt
    // reached one (input null, no command); otherwise it replays its input
    const resume = this.resumeAfterRestart.delete(run.run_id) && (await this.ctx.saver.hasCheckpointOfRun(run.thread_id, run.run_id));
    if (stopActionOf(inflight.record) !== undefined) {
      // stopped before it started (a stop recorded before a crash, or one that came while it was
      // being started): it ends as the stop says without running
      return this.finishInFlight(inflight, { status: "interrupted", rolledBack: false }, stateless, outcomeQueued);
    }
    const startedAt = nowIso();
    const running: RunRecord = stored ? run : { ...inflight.record, status: "running", attempt: run.attempt + 1, started_at: startedAt, updated_at: startedAt };
    inflight.record = running;
    // (written as it is when the write goes out: a stop recorded meanwhile is in it). Held while
    // the previous run's final commit is in flight: if the graph has ended by then, the run's
    // finish is the next write of it (issued once that commit is in), and on PostgreSQL the two
    // leave in one transaction, so the `running` record would be overwritten unseen: not written.
    if (!stored)
      this.send(() => {
        if (inflight.executed === true) return;
        const saved = s.runs.save(inflight.record).committed;
        // cluster: refused by the lease fence, the actor was abandoned, nothing more to do (no fences: as before)
        if (s.fences !== undefined) void saved.catch((err: unknown) => void (this.abandoned || Promise.reject(err)));
        else void saved;
      });
    this.ctx.telemetry.started(running);
    trace?.("actor.run.start");
    const protocol = run.kwargs.protocol === true;
    const start = {
      type: "run.start",
      runId: run.run_id,
      threadId: run.thread_id,
      resumable: run.kwargs.resumable,
      attempt: running.attempt,
      protocol,
    } as const;
    this.send(() => this.ctx.post(start));

    let seq = 0;
    const emit: EmitFn = (event, data) => {
      const e = { id: seq++, event, data };
      this.send(() => this.ctx.emit(run.run_id, e));
    };
    if (!protocol) emit("metadata", JSON.stringify({ run_id: run.run_id, attempt: running.attempt }));

    const executed = resume ? { ...running, kwargs: { ...running.kwargs, input: null, command: undefined } } : running;
    let outcome: RunOutcome;
    try {
      const graph = await this.ctx.registry.get(run.graph_id, run.kwargs.config as Record<string, unknown>, {
        checkpointer: !stateless,
        accessContext: "threads.create_run",
      });
      const lib = await this.ctx.registry.lib(run.graph_id);
      // started before its create committed (PostgreSQL): the create's statement goes out first.
      // The driver sends it from a process.nextTick, which waits for the microtask queue to drain,
      // and a graph that awaits no I/O (its first checkpoint read answered from memory) runs its
      // steps as microtasks: the create then left only when the graph first yielded.
      if (stored) await new Promise<void>((resolve) => process.nextTick(resolve));
      // its create refused meanwhile: never started (a graph stream given an aborted signal
      // rejects at once, while LangGraph still puts its input checkpoint, after the run ended)
      outcome = inflight.createFailed
        ? { status: "interrupted", rolledBack: false }
        : await (protocol ? executeProtocolRun : executeRun)({ run: executed, graph, lib, signal: abort.signal, emit, execution: inflight.execution });
    } catch (err) {
      const error = { error: (err as Error).name ?? "Error", message: (err as Error).message ?? String(err) };
      if (protocol) new ProtocolEventShaper(protocolEmitter(emit), run.graph_id).fail(error.message);
      else emit("error", JSON.stringify(error));
      outcome = { status: "error", rolledBack: false, error };
    }
    trace?.("actor.run.executed");
    inflight.executed = true;
    await this.finishInFlight(inflight, outcome, stateless, outcomeQueued);
  }

  /** Ends the run in flight: its outcome is fixed when its turn in the mailbox comes, a stop recorded until then wins. */
  private async finishInFlight(inflight: InFlight, outcome: RunOutcome, stateless: boolean, outcomeQueued: () => void): Promise<void> {
    if (this.abandoned) return; // its lease moved: the new owner resumes it from its last checkpoint
    // started before its create committed: its end is decided once the create has landed (reads it as stored)
    if (inflight.created !== undefined) await inflight.created.catch(() => undefined);
    if (inflight.createFailed) {
      // it never existed: its checkpoint writes failed (reported to nobody: taken here)
      await this.ctx.saver.flush(this.threadId).catch(() => undefined);
      return;
    }
    this.finishing++;
    try {
      await this.serial(() => {
        inflight.outcomeFixed = true;
        const fixed = outcomeAfterStop(outcome, stopActionOf(inflight.record));
        // rolled back: LangGraph may still put a checkpoint after the aborted stream ended (its
        // loop runs on); refused from here, so none lands after the run's checkpoints are deleted
        if (fixed.rolledBack && inflight.execution !== undefined) this.ctx.saver.refuseExecution?.(inflight.execution);
        return this.finish(inflight.record, fixed, stateless, outcomeQueued, inflight.threadDeleted === true);
      }, false);
    } catch (err) {
      if (!this.abandoned) throw err; // its final write was refused by the lease fence: the new owner ends it
    } finally {
      this.finishing--;
    }
  }

  /**
   * Persist the outcome: run status, thread status/values, then tell the HTTP thread and the
   * webhook worker. `queued` is called once the run's final transaction is queued (the thread's
   * next run may start then); the mailbox stays held until it commits. `runGone`: whether the
   * run's record went with its thread (a run in flight: this actor knows; undefined: read it).
   */
  private async finish(run: RunRecord, outcome: RunOutcome, stateless: boolean, queued?: () => void, runGone?: boolean): Promise<void> {
    const s = this.ctx.storage;
    const endedAt = nowIso();
    const final: RunRecord = { ...run, status: outcome.status, updated_at: endedAt, ended_at: endedAt, ...(outcome.error ? { error: outcome.error } : {}) };
    let threadStatus: ThreadStatus | "deleted";
    /** the thread's state values after the run, as JSON segments (stored as is: long threads stay cheap) */
    let valuesJson: JsonSegments | undefined;
    /** valuesJson as UTF-8: written to LMDB, and posted as the output when that is the same JSON */
    let valuesBytes: Uint8Array | undefined;
    /** the run's webhook delivery, written with its final status (the outbox) */
    let delivery: WebhookDeliveryRecord | undefined;
    // Usually no read: the actor knows its thread record, and only its own deleteThread removes a
    // run in flight. Otherwise both reads at once (on PostgreSQL two round trips in parallel).
    trace?.("actor.finish.reads");
    const known = stateless ? undefined : this.knownThread();
    const [thread, runExists] = stateless
      ? [undefined, false]
      : known !== undefined && runGone !== undefined
        ? [known.record, !runGone]
        : await Promise.all([this.threadRecord(), runGone !== true && s.runs.exists(this.threadId, run.run_id)]);
    if (stateless) {
      threadStatus = "deleted";
      delivery = this.webhookOf(final, undefined, true);
      await this.remember(undefined, s.threads.delete(this.threadId, delivery && { runId: final.run_id, delivery }));
    } else if (thread === undefined || !runExists) {
      // The thread was deleted while the run ran (deleteThread aborted it, and removed the run's
      // record, committed at its create): leave nothing behind, or a thread re-created with the
      // same id would list the run or take its status and values.
      threadStatus = "deleted";
      delivery = this.webhookOf(final, undefined, false);
      await this.forgetOnFailure(s.runs.discard({ threadId: this.threadId, runId: run.run_id }, delivery));
    } else {
      if (outcome.rolledBack) await this.ctx.saver.deleteCheckpointsOfRun(this.threadId, run.run_id);
      let hasNext = false;
      let interrupts: Record<string, unknown[]> | undefined;
      const ranToEnd =
        outcome.status === "success" &&
        !outcome.rolledBack &&
        outcome.lastValues !== undefined &&
        outcome.lastValuesInterrupt !== true &&
        !run.kwargs.interrupt_before &&
        !run.kwargs.interrupt_after;
      // As upstream (reference §6.6): a run cancelled while it ran leaves the thread without
      // values and interrupts (its state, read through the checkpoints, is kept).
      const cancelled = outcome.status === "interrupted" && !outcome.rolledBack;
      if (ranToEnd) {
        // The graph reached END: its last root values chunk is the final state and no task is
        // pending, so the state read (and re-serialization) below is not needed.
        valuesJson = outcome.lastValues;
        interrupts = {};
      } else if (!cancelled && this.ctx.registry.has(run.graph_id)) {
        try {
          const graph = await this.ctx.registry.get(run.graph_id, run.kwargs.config as Record<string, unknown>, { accessContext: "threads.read" });
          const snap = await currentState(graph, stateConfig(thread));
          if (snap.config?.configurable?.checkpoint_id) {
            valuesJson = toJsonSegments(snap.values);
            hasNext = snap.next.length > 0;
            interrupts = {};
            for (const t of snap.tasks) interrupts[t.id] = toPlain(t.interrupts ?? []);
          }
        } catch (err) {
          this.ctx.log(`state read after run ${run.run_id} failed: ${(err as Error).message}`);
        }
      }
      threadStatus = threadStatusAfterRun({ outcome: outcome.status, hasNext, queued: this.queue.length });
      if (valuesJson !== undefined) valuesBytes = jsonBytes(valuesJson);
      const next: ThreadRecord = { ...thread, status: threadStatus as ThreadStatus, updated_at: endedAt };
      if (interrupts) next.interrupts = interrupts as ThreadRecord["interrupts"];
      else if (cancelled) delete next.interrupts;
      delivery = this.webhookOf(final, valuesBytes, false);
      // issued now (LMDB: a batch, which lmdb-js' write thread commits without waiting for this thread)
      trace?.("actor.finish.issue");
      const committed = this.remember(
        next,
        s.runs.finish({
          run: outcome.rolledBack ? { rolledBack: { threadId: this.threadId, runId: run.run_id } } : final,
          thread: next,
          prev: thread,
          valuesJson: valuesBytes,
          webhook: delivery,
        }).committed,
      );
      const held: (() => void)[] = (this.heldSends ??= []);
      this.ctx.saver.holdWritesUntil(this.threadId, committed);
      queued?.();
      try {
        await committed;
      } catch (err) {
        this.releaseSends(held);
        throw err;
      }
      // run.done goes first, then what the next run sent meanwhile
      trace?.("actor.finish.committed");
      this.announceOutcome(final, outcome, valuesJson, valuesBytes, threadStatus, delivery);
      this.releaseSends(held);
      return;
    }
    this.announceOutcome(final, outcome, valuesJson, valuesBytes, threadStatus, delivery);
  }

  /**
   * The webhook delivery of a run that ended, for the outbox (the commit that writes its final
   * status enqueues it); undefined when the run asked for none or webhooks are disabled.
   */
  private webhookOf(final: RunRecord, values: Uint8Array | undefined, stateless: boolean): WebhookDeliveryRecord | undefined {
    if (!final.kwargs.webhook || !this.ctx.webhooks) return undefined;
    return newWebhookDelivery(final, values, stateless);
  }

  private releaseSends(held: (() => void)[]): void {
    if (this.heldSends === held) this.heldSends = undefined;
    // (splice: a run started before its create committed shares the array with its finish)
    for (const deliver of held.splice(0)) deliver();
  }

  /** Tells the HTTP thread (and the webhook worker) a run ended, once its outcome is committed. */
  private announceOutcome(
    final: RunRecord,
    outcome: RunOutcome,
    valuesJson: JsonSegments | undefined,
    valuesBytes: Uint8Array | undefined,
    threadStatus: ThreadStatus | "deleted",
    delivery: WebhookDeliveryRecord | undefined,
  ): void {
    const outputJson = outcome.error ? [toJsonText({ __error__: outcome.error })] : (outcome.lastValues ?? valuesJson ?? ["null"]);
    // Posted (when it is) as a copy, not transferred: memory malloc'd here and freed on the HTTP
    // thread defeated glibc's reuse of freed chunks (every run mapped fresh pages: +25% worker CPU
    // on enqueue-1000).
    const output = { json: outputJson, bytes: outputJson === valuesJson ? valuesBytes : undefined };
    this.ctx.runDone({ runId: final.run_id, threadId: this.threadId, status: final.status, threadStatus }, output);
    this.ctx.telemetry.ended(final);
    if (delivery) this.ctx.webhookDue(this.threadId, final.run_id);
  }

  /** A queued run cancelled on its own: it ends in one transaction with the thread's new status. */
  private async cancelQueued(run: RunRecord, action: StopAction): Promise<void> {
    const i = this.queue.indexOf(run);
    if (i >= 0) this.queue.splice(i, 1);
    const now = nowIso();
    const threadStatus: ThreadStatus = this.current || this.queue.length ? "busy" : "idle";
    const stopped = this.queuedStop(run, action, now);
    // it writes the stored record (read in its own commit: the known one) with the new status and updated_at
    const known = this.knownThread();
    const write = this.ctx.storage.runs.stopQueued(this.threadId, stopped.write, threadStatus, now);
    if (known === undefined) await write;
    else await this.remember(known.record && { ...known.record, status: threadStatus, updated_at: now }, write);
    this.announceQueuedStopped(stopped, threadStatus);
    this.pump(); // it may have been the delayed head the timer waited for
  }

  /**
   * How a stop ends a queued run (written in the stop's commit): with interrupt it ends
   * `interrupted` (its webhook enqueued), with rollback it is deleted.
   */
  private queuedStop(run: RunRecord, action: StopAction, now: string): StoppedQueuedRun {
    if (action === "rollback") return { run, delivery: undefined, write: { rolledBack: { threadId: this.threadId, runId: run.run_id } } };
    const final: RunRecord = { ...run, status: "interrupted", cancel_reason: action, updated_at: now, ended_at: now };
    const delivery = this.webhookOf(final, undefined, false);
    return { run: final, delivery, write: { final, webhook: delivery } };
  }

  private announceQueuedStopped({ run, delivery }: StoppedQueuedRun, threadStatus: ThreadStatus): void {
    this.ctx.telemetry.ended({ ...run, status: "interrupted", ended_at: run.ended_at ?? nowIso() });
    this.send(() => this.ctx.runDone({ runId: run.run_id, threadId: this.threadId, status: "interrupted", threadStatus }, { json: ["null"] }));
    if (delivery) this.send(() => this.ctx.webhookDue(this.threadId, run.run_id));
  }

  /**
   * Marks the run in flight with a stop (in memory); returns the record to write, or undefined
   * when there is nothing to add (its outcome is already being written, or an equal or stronger
   * stop is recorded). The caller writes it before it replies.
   */
  private markStop(inflight: InFlight, action: StopAction): RunRecord | undefined {
    if (inflight.outcomeFixed) return undefined;
    const stop = stopToRecord(stopActionOf(inflight.record), action);
    if (stop === undefined) return undefined;
    inflight.record = { ...inflight.record, cancel_reason: stop, updated_at: nowIso() };
    return inflight.record;
  }

  private async cancel(runId: string, action: StopAction, wait: boolean): Promise<{ found: boolean }> {
    const inflight = this.current;
    if (inflight?.record.run_id === runId) {
      // the stop is committed before the reply: a crash after it cannot undo it (recovery carries it out)
      const marked = this.markStop(inflight, action);
      if (marked) inflight.stopRecorded = this.ctx.storage.runs.save(marked).committed;
      inflight.abort.abort(action);
      await inflight.stopRecorded;
      if (wait) await inflight.finished;
      return { found: true };
    }
    const queued = this.queue.find((r) => r.run_id === runId);
    if (queued) {
      // It may start while this waits for the mailbox: then it is cancelled as the running run.
      const started = await this.serial(async () => {
        if (this.queue.includes(queued)) {
          await this.cancelQueued(queued, action);
          return false;
        }
        return true;
      });
      return started ? this.cancel(runId, action, wait) : { found: true };
    }
    if (!(await this.ctx.storage.runs.get(this.threadId, runId))) throw runNotFound();
    return { found: true };
  }

  private async deleteRun(runId: string, keepCheckpoints: boolean): Promise<{ deleted: boolean }> {
    const s = this.ctx.storage;
    const run = await s.runs.get(this.threadId, runId);
    if (!run) throw runNotFound();
    if (this.current?.record.run_id === runId || this.queue.some((r) => r.run_id === runId)) {
      throw new TroupeError("CONFLICT", `Run ${runId} is ${run.status}: cancel it before deleting`);
    }
    await s.runs.delete(this.threadId, runId);
    if (!keepCheckpoints) await this.ctx.saver.deleteCheckpointsOfRun(this.threadId, runId);
    return { deleted: true };
  }
}

/** A thread create that found the thread: `do_nothing` answers it, else 409. */
function existingThread(existing: ThreadRecord, ifExists: "raise" | "do_nothing"): ThreadRecord {
  if (ifExists === "do_nothing") return existing;
  throw new TroupeError("CONFLICT", "Thread already exists");
}

/** A stateless run whose temporary thread goes with it (on_completion "delete", the default). */
function isTemporary(run: RunRecord): boolean {
  return run.kwargs.temporary && run.on_completion !== "keep";
}
