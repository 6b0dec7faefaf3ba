// Thread actors in-process, hosted the way src/actors/shard-host.ts hosts them but with a shard
// context that records what the actors send (instead of posting it to the HTTP thread) and a
// ManualClock. Storage, checkpointer and graphs are real: LMDB in a temp dir, LangGraph graphs
// from test/fixtures/actor/. A "crash" is kill() — every storage call of the old harness (its
// actors and its checkpointer) then never completes — and restarted(): a new harness with its own
// storage handle on the same data dir whose actors recover the active runs.
// `ActorHarness.onPort` hosts actors over any storage port and its saver instead (PostgreSQL,
// fenced like a cluster node's shard): no crash, no LMDB helpers. Either way `reads` counts the
// actors' record reads (threads.get, runs.exists) through the port.
import { assistantRecord } from "./records.ts";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { GraphRegistry } from "../../src/actors/graph-registry.ts";
import { recoverActiveRuns } from "../../src/actors/recovery.ts";
import { runCheckpointMetadata } from "../../src/actors/run-checkpoint-saver.ts";
import { lmdbStoragePort } from "../../src/storage/lmdb/adapter.ts";
import { lmdbCheckpointSavers } from "../../src/storage/lmdb/checkpoints.ts";
import type { ShardContext, ThreadCheckpointOps } from "../../src/actors/shard-context.ts";
import type { AssistantCheck, StoragePort } from "../../src/storage/port.ts";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { ThreadActor } from "../../src/actors/thread-actor.ts";
import type { CreateRunCommand } from "../../src/bridge/messages.ts";
import { openStorage, type Storage } from "../../src/storage/env.ts";
import type { AssistantRecord, MultitaskStrategy, RunRecord, ThreadRecord } from "../../src/storage/records.ts";
import { threadValues } from "../../src/storage/thread-values.ts";
import { ManualClock } from "../../src/util/clock.ts";
import { waitUntil } from "./wait.ts";
import { gateOf } from "../fixtures/actor/gate.ts";
import { RunTelemetry } from "../../src/actors/run-telemetry.ts";

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), "../fixtures/actor");

export const GATE_ASSISTANT: AssistantRecord = assistantRecord("00000000-0000-4000-8000-00000000ga7e", { graph_id: "gate", name: "gate" });

export interface CreateOptions {
  strategy?: MultitaskStrategy;
  afterSeconds?: number;
  input?: string;
  /** the run's assistant (default GATE_ASSISTANT) and, as from the HTTP thread's cache, its check */
  assistant?: AssistantRecord;
  assistantCheck?: AssistantCheck;
}

/** A storage port and its checkpoint saver, as a shard opens them (ActorHarness.onPort). */
export interface PortBackend {
  port: StoragePort;
  saver: BaseCheckpointSaver & ThreadCheckpointOps;
}

/** How many record reads the actors made through the port. */
export interface RecordReads {
  /** threads.get */
  threads: number;
  /** runs.exists */
  runs: number;
}

export class ActorHarness {
  /** what the actors sent, in order: "start <run>", "done <run> <status> <thread status>", "webhook <run>" */
  readonly sent: string[] = [];
  /** the actors' record reads so far (tests reset it) */
  readonly reads: RecordReads = { threads: 0, runs: 0 };
  /** called (synchronously) when a thread's run has queued its final transaction, before it commits */
  onFinishQueued: ((threadId: string) => void) | undefined;
  /**
   * a run create is issued to storage only once the promise this returns for its run resolves (a
   * commit that takes that long); rejected, nothing is written and the create fails with it
   */
  createGate: ((runId: string) => Promise<void> | undefined) | undefined;
  /**
   * a run's finish is issued to storage at once (its place in the thread's write order), but the
   * actor learns of its commit only once the promise this returns for its run resolves (a slow commit)
   */
  finishGate: ((runId: string) => Promise<void> | undefined) | undefined;

  /** Sets finishGate to hold the commit of `runId`'s finish (as the actor sees it) until the returned function is called. */
  holdFinishOf(runId: string): () => void {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    this.finishGate = (id) => (id === runId ? held : undefined);
    return release;
  }

  /**
   * Two gate-graph runs of thread `t`, `second` queued behind `first`, both let through their
   * gates while `first`'s final commit is held (holdFinishOf): resolves once both outcomes wait for
   * that commit (`second`'s graph ended before it), with the function that lets it in.
   */
  async endBehindHeldFinish(t: string, first: string, second: string): Promise<() => void> {
    const commitFirst = this.holdFinishOf(first);
    await this.create(t, first);
    await this.create(t, second);
    gateOf(second).open();
    gateOf(first).open();
    await waitUntil(() => this.actor(t).finishingRuns === 2, { what: "both runs' outcomes waiting for the first's final commit" });
    return commitFirst;
  }
  /** the run ids of the runs.save calls the actors made (a run's `running` record, a recorded stop) */
  readonly saves: string[] = [];
  readonly ctx: ShardContext;
  private readonly actors = new Map<string, ThreadActor>();
  private killed = false;
  /** storage handles opened by restarted() (closed by close()) */
  private readonly opened: Storage[] = [];

  /** `dir`: the data dir of `storage` (restarted() opens it again); `backend`: see onPort */
  constructor(
    readonly storage: Storage,
    private readonly dir: string,
    readonly clock = new ManualClock(Date.now()),
    backend?: PortBackend,
  ) {
    // what this harness's actors and checkpointer see: the storage until kill(), then nothing
    const view = new Proxy(storage, { get: (target, prop) => (this.killed ? FROZEN : Reflect.get(target, prop)) });
    const saver = backend?.saver ?? lmdbCheckpointSavers(view).saver({ putMetadata: runCheckpointMetadata });
    const registry = new GraphRegistry([{ graphId: "gate", filePath: path.join(FIXTURES, "gate.ts"), exportName: "graph" }], {
      checkpointer: () => saver,
      store: undefined,
    });
    this.ctx = {
      draining: false,
      // as a shard on this backend does (tests of the early start turn it on)
      startBeforeCommit: backend?.port.backend === "postgres",
      storage: countReads(this.gatedFinishes(this.gatedCreates(backend?.port ?? lmdbStoragePort(view))), this.reads, this.saves),
      registry,
      saver: {
        deleteThread: (t) => saver.deleteThread(t),
        copyThread: (a, b) => saver.copyThread(a, b),
        deleteCheckpointsOfRun: (t, r) => saver.deleteCheckpointsOfRun(t, r),
        hasCheckpointOfRun: (t, r) => saver.hasCheckpointOfRun(t, r),
        hasCheckpoint: (t, ns, id) => saver.hasCheckpoint(t, ns, id),
        patchMetadata: (t, patch, id) => saver.patchMetadata(t, patch, id),
        pruneToLatest: (t) => saver.pruneToLatest(t),
        holdWritesUntil: (threadId, until, refuseUntil) => {
          saver.holdWritesUntil(threadId, until, refuseUntil);
          // (with refuseUntil: a run started before its create committed, not a finish)
          if (refuseUntil === undefined) this.onFinishQueued?.(threadId);
        },
        flush: (threadId) => saver.flush(threadId),
        refuseExecution: (execution) => saver.refuseExecution?.(execution),
        learnNoCheckpoints: (threadId, epoch) => saver.learnNoCheckpoints?.(threadId, epoch),
      },
      clock,
      post: (msg) => {
        if (msg.type === "run.start") this.sent.push(`start ${msg.runId}`);
      },
      runDone: (done) => this.sent.push(`done ${done.runId} ${done.status} ${done.threadStatus}`),
      emit: () => undefined,
      webhooks: true,
      webhookDue: (_threadId, runId) => this.sent.push(`webhook ${runId}`),
      maybeRelease: () => undefined,
      telemetry: new RunTelemetry(undefined, {
        error: () => undefined,
        warn: () => undefined,
        info: () => undefined,
        debug: () => undefined,
        enabled: () => false,
      }),
      log: () => undefined,
    };
  }

  /** Actors over `backend` (e.g. PostgreSQL with its fences); storage, run(), thread(), messages(), kill() and restarted() are LMDB's only. */
  static onPort(backend: PortBackend, clock = new ManualClock(Date.now())): ActorHarness {
    return new ActorHarness(NOT_LMDB as Storage, "", clock, backend);
  }

  private gatedCreates(port: StoragePort): StoragePort {
    const create = port.runs.create.bind(port.runs);
    port.runs.create = (write) => {
      const gate = this.createGate?.(write.run.run_id);
      return gate === undefined ? create(write) : { committed: gate.then(() => create(write).committed) };
    };
    return port;
  }

  private gatedFinishes(port: StoragePort): StoragePort {
    const finish = port.runs.finish.bind(port.runs);
    port.runs.finish = (end) => {
      const issued = finish(end);
      const gate = this.finishGate?.("rolledBack" in end.run ? end.run.rolledBack.runId : end.run.run_id);
      return gate === undefined ? issued : { committed: gate.then(() => issued.committed) };
    };
    return port;
  }

  actor(threadId: string): ThreadActor {
    let a = this.actors.get(threadId);
    if (!a) this.actors.set(threadId, (a = new ThreadActor(threadId, this.ctx)));
    return a;
  }

  /** Creates a run on a gate-graph thread (the thread is created with it); resolves with the stored run. */
  create(threadId: string, runId: string, opts: CreateOptions = {}): Promise<RunRecord> {
    const cmd: CreateRunCommand = {
      type: "run.create",
      threadId,
      runId,
      assistant: opts.assistant ?? GATE_ASSISTANT,
      ...(opts.assistantCheck === undefined ? {} : { assistantCheck: opts.assistantCheck }),
      kwargs: {
        input: { messages: [{ role: "human", content: opts.input ?? runId }] },
        config: {},
        stream_mode: ["values"],
        temporary: false,
        subgraphs: false,
        resumable: false,
      },
      metadata: {},
      multitaskStrategy: opts.strategy ?? "enqueue",
      ifNotExists: "create",
      afterSeconds: opts.afterSeconds ?? 0,
      stateless: false,
      onCompletion: "keep",
      observed: false,
      outputAwaited: false,
    };
    return this.actor(threadId).handle(cmd);
  }

  cancel(threadId: string, runId: string, action: "interrupt" | "rollback" = "interrupt", wait = false): Promise<{ found: boolean }> {
    return this.actor(threadId).handle({ type: "run.cancel", threadId, runId, action, wait });
  }

  /** The run as stored now (a fresh read snapshot). */
  run(threadId: string, runId: string): RunRecord | undefined {
    this.storage.root.resetReadTxn();
    return this.storage.runs.get([threadId, runId]);
  }

  thread(threadId: string): ThreadRecord | undefined {
    this.storage.root.resetReadTxn();
    return this.storage.threads.get(threadId);
  }

  /** The messages of the thread's stored values, as "type:content". */
  messages(threadId: string): string[] {
    this.storage.root.resetReadTxn();
    const values = threadValues(this.storage, threadId) as { messages?: { type: string; content: string }[] } | undefined;
    return (values?.messages ?? []).map((m) => `${m.type}:${m.content}`);
  }

  /** Resolves once the actors have sent `line`. */
  async sentLine(line: string): Promise<void> {
    await waitUntil(() => this.sent.includes(line), { what: `"${line}" (sent: ${this.sent.join(", ")})` });
  }

  /**
   * The process dies here: its actors start nothing more, and every storage call they or their
   * checkpointer make from now on never completes (a graph released later writes nothing).
   */
  kill(): void {
    this.ctx.draining = true;
    this.killed = true;
  }

  /** A server started on the same data after a crash: fresh actors recover the active runs. */
  async restarted(): Promise<ActorHarness> {
    const storage = openStorage(this.dir);
    this.opened.push(storage);
    const next = new ActorHarness(storage, this.dir, this.clock);
    await recoverActiveRuns(
      next.ctx.storage.runs,
      () => true,
      (threadId) => next.actor(threadId),
    );
    return next;
  }

  /** Closes the storage handles restarted() opened (the test's own storage is closed by its owner). */
  async close(): Promise<void> {
    for (const s of this.opened.splice(0)) await s.close();
  }
}

/** The port with its threads.get and runs.exists counted in `reads`, and runs.save's run ids listed in `saves`. */
function countReads(port: StoragePort, reads: RecordReads, saves: string[]): StoragePort {
  const counted = <T extends object>(family: T, method: keyof T, count: () => void): T =>
    new Proxy(family, {
      get: (target, prop) => {
        const value: unknown = Reflect.get(target, prop);
        if (typeof value !== "function") return value;
        if (prop !== method) return value.bind(target);
        return (...args: unknown[]) => {
          count();
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
  const threads = counted(port.threads, "get", () => reads.threads++);
  const runs = counted(port.runs, "exists", () => reads.runs++);
  const save = port.runs.save.bind(port.runs);
  port.runs.save = (run) => {
    saves.push(run.run_id);
    return save(run);
  };
  return new Proxy(port, {
    get: (target, prop) => {
      if (prop === "threads") return threads;
      if (prop === "runs") return runs;
      const value: unknown = Reflect.get(target, prop);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/** The LMDB handle of a harness over another port: any use is a test's mistake. */
const NOT_LMDB: unknown = new Proxy(
  {},
  {
    get: (_t, prop) => {
      throw new Error(`ActorHarness.onPort: storage.${String(prop)} is LMDB's only (read through the port)`);
    },
  },
);

/** Storage after a crash: every property leads here again and every call returns a promise that never settles. */
const FROZEN: unknown = (() => {
  const never = new Promise<never>(() => undefined);
  const proxy: unknown = new Proxy(() => undefined, {
    get: (_t, prop) => (prop === "then" ? undefined : proxy),
    apply: () => never,
  });
  return proxy;
})();
