// The shard pool of a cluster node (docs/CLUSTER.md): a thread's commands go to the node holding
// its lease. Held here → this node's shard, as on one node; held by another live node → forwarded
// to it as a command (cluster_commands, commands.ts), whose pool runs it on its shard and replies;
// free or expired → this node takes the lease, recovers the thread's runs, and runs it here.
// The LMDB (single-node) server uses ShardPool itself: none of this is on its path.
import type { CreateRunCommand, ShardReplies, ShardRequest } from "../bridge/messages.ts";
import { shardOf } from "../bridge/sharding.ts";
import type { ClusterNode } from "../cluster/node.ts";
import type { SentCommand } from "../cluster/commands.ts";
import type { Lease } from "../cluster/leases.ts";
import { deserializeError, TroupeError } from "../errors.ts";
import { componentLog } from "../log/logger.ts";
import type { RunsPort, ThreadsPort } from "../storage/port.ts";
import type { RunRecord, ThreadRecord } from "../storage/records.ts";
import { RemoteRuns } from "./remote-runs.ts";
import { RemoteThreads, THREAD_ID_STEP, threadIdTag, type RemoteThreadStream } from "./remote-threads.ts";
import type { ThreadStreamMode } from "./thread-stream-hub.ts";
import type { RunStreams } from "./run-hub.ts";
import { ShardDiedError, ShardPool, type ShardPoolOptions } from "./shard-pool.ts";
import type { ThreadProtocolHub } from "./thread-protocol-hub.ts";

const log = componentLog("cluster-pool");

/** A forwarded command's reply: its value, or "moved" (the receiver does not hold the thread: look again). */
type ForwardedReply = { v: unknown } | { moved: true };
const MOVED = JSON.stringify({ moved: true } satisfies ForwardedReply);

/** How long a command is retried while its thread's owner cannot be reached (a dead owner's lease expires within the TTL). */
const ROUTE_DEADLINE_MS = 60_000;
/** Reply timeout of a forwarded command; cancels that wait for the run's end get longer. */
const FORWARD_TIMEOUT_MS = 10_000;
const FORWARD_WAIT_TIMEOUT_MS = 120_000;
/** How long a create whose shard died is given to commit before it is taken for not created. */
const CREATE_SETTLE_MS = 250;

export interface ClusterPoolOptions extends ShardPoolOptions {
  /** the database schema (bus channel names) */
  schema: string;
  runs: RunsPort;
  threads: ThreadsPort;
}

type ProtocolOpener = NonNullable<ReturnType<ThreadProtocolHub["takeOpener"]>>;
/** A run create forwarded with the protocol announcement that opens its session. */
type ForwardedCreate = CreateRunCommand & { opener?: ProtocolOpener };

type Routed<C extends ShardRequest> = Promise<ShardReplies[C["type"]]>;
/** The commands that name a thread (all but graph.describe): they follow the thread's lease. */
type ThreadRequest = Exclude<ShardRequest, { type: "graph.describe" }>;

export class ClusterShardPool extends ShardPool {
  private node: ClusterNode | undefined;
  private remote: RemoteRuns | undefined;
  private remoteThreads: RemoteThreads | undefined;
  private streams: RunStreams | undefined;
  /** per thread: the routing of commands in issue order (a command is posted or committed before the next is routed) */
  private readonly chains = new Map<string, Promise<void>>();
  /** per thread: a lease being taken and the thread recovered; its commands wait */
  private readonly acquiring = new Map<string, Promise<boolean>>();
  /** per thread: a take started by prepareThread, not yet settled (its command's routing need not take again) */
  private readonly prepared = new Map<string, Promise<boolean>>();
  /** per thread: commands posted to this node's shard and not yet answered (an idle actor's lease stays while any is) */
  private readonly inflight = new Map<string, number>();

  constructor(private readonly clusterOpts: ClusterPoolOptions) {
    super({ ...clusterOpts, cluster: true });
  }

  /** Run streams as handlers see them: the hub's, with runs executing elsewhere followed there. */
  override get runs(): RunStreams {
    return this.streams ?? this.hub;
  }

  /** Connects the pool to its node (once ClusterNode.start resolved). */
  attach(node: ClusterNode): void {
    this.node = node;
    this.remote = new RemoteRuns({
      hub: this.hub,
      node,
      schema: this.clusterOpts.schema,
      runs: this.clusterOpts.runs,
      threads: this.clusterOpts.threads,
      observeAt: (owner, threadId, runId) => this.observeAt(owner, threadId, runId),
      outputOf: (done) => this.runOutput(done),
    });
    this.streams = this.remote.view();
    this.hub.threads.tagIds(threadIdTag(node.nodeId), THREAD_ID_STEP);
    this.remoteThreads = new RemoteThreads({
      hub: this.hub,
      node,
      schema: this.clusterOpts.schema,
      observe: (threadId, runId) => void this.observeRun(threadId, runId, false).catch(() => undefined),
    });
    this.remoteThreads.start().catch((err: unknown) => log.error("thread watches could not start", { err }));
  }

  override watchThread(threadId: string): Promise<void> {
    return this.remoteThreads?.watch(threadId) ?? Promise.resolve();
  }

  override async threadStreamFrom(threadId: string, after: number, modes: ReadonlySet<ThreadStreamMode>): Promise<RemoteThreadStream | undefined> {
    if (this.hub.threads.ownsId(after)) return undefined;
    return this.remoteThreads?.streamFrom(threadId, after, modes);
  }

  override request<C extends ShardRequest>(cmd: C): Routed<C> {
    const node = this.node;
    const req: ShardRequest = cmd;
    if (req.type === "graph.describe" || node === undefined || this.closing) return super.request(cmd);
    const t = req.threadId;
    if (node.epochOf(t) !== undefined && !this.chains.has(t) && !this.acquiring.has(t)) return this.local(req) as Routed<C>;
    // a thread whose id this request generated: no node can hold it, have its actor or know of it
    // until the reply, so it is created here (createFresh)
    if (req.type === "thread.create" && req.fresh === true) return this.createFresh(node, req) as Routed<C>;
    return this.routed(node, req) as Routed<C>;
  }

  /**
   * A thread whose id this request generated, created on this node's shard. With other nodes alive
   * it takes no lease: its record is written without one (as thread.copy writes its copy) and its
   * first run takes the lease wherever it arrives (behind a balancer usually elsewhere, which would
   * otherwise forward it here). On a node alone the create takes the lease in its own statement
   * (the shard fences the thread and knows its record and that it has no checkpoint), held here and
   * lingering like an idle one's: the first run needs no acquire, record read or checkpoint read
   * (docs/CLUSTER.md, "Lease lifecycle").
   */
  private async createFresh(node: ClusterNode, req: Extract<ThreadRequest, { type: "thread.create" }>): Promise<ShardReplies["thread.create"]> {
    const alone = node.aliveNodes === 1 && !node.isDraining && !req.supersteps?.length;
    if (!alone) return this.local(req);
    const { taken, ...thread } = await this.local({ ...req, take: node.leaseTake() });
    if (taken !== undefined) node.adopt({ threadId: req.threadId, epoch: taken.epoch });
    return thread;
  }

  /**
   * Takes the lease of a thread nobody is known to hold while the HTTP thread reads the run's
   * assistant and checks its request (the command's routing then finds it held, or waits for this
   * take): the acquire's round trip is no longer serial with them.
   */
  override prepareThread(threadId: string): void {
    const node = this.node;
    if (node === undefined || this.closing || node.isDraining) return;
    if (node.epochOf(threadId) !== undefined || this.chains.has(threadId) || this.acquiring.has(threadId)) return;
    const taking = this.take(node, threadId);
    this.prepared.set(threadId, taking);
    const settled = (took: boolean) => {
      if (this.prepared.get(threadId) === taking) this.prepared.delete(threadId);
      // taken, and no command on its way (the request failed its checks): the lease lingers and
      // goes as an idle one's would; a command routed later ends the linger (local: node.busy)
      if (took && !this.chains.has(threadId) && !this.inflight.has(threadId)) node.idle(threadId);
    };
    void taking.then(settled, () => settled(false));
  }

  override async createRun(cmd: CreateRunCommand): Promise<RunRecord> {
    const run = await this.request(cmd).catch((err: unknown) => this.createdBeforeShardDied(cmd, err));
    this.created(cmd, run);
    this.remote?.created(run.run_id, run.thread_id);
    return run;
  }

  /**
   * A run that starts before its create commits (PostgreSQL: ShardContext.startBeforeCommit) can
   * take its worker down (a graph calling process.exit, a native crash) with the create's
   * statement sent and its reply lost. If the create committed, the run is this request's answer
   * (the shard's hand-over and a takeover scan resume it), not a 503 whose retry would create the
   * run twice; read again once a moment later, as the statement may still be executing.
   */
  private async createdBeforeShardDied(cmd: CreateRunCommand, err: unknown): Promise<RunRecord> {
    if (!(err instanceof ShardDiedError)) throw err;
    const read = () => this.clusterOpts.runs.get(cmd.threadId, cmd.runId);
    const run = (await read()) ?? (await new Promise((resolve) => setTimeout(resolve, CREATE_SETTLE_MS)).then(read));
    if (run === undefined) throw err;
    return run;
  }

  override async close(graceMs?: number): Promise<void> {
    this.remote?.close();
    this.remoteThreads?.close();
    await super.close(graceMs);
  }

  // --- the owner's side ------------------------------------------------------------------------

  /** Runs a command another node forwarded here (ClusterNode `handle`); the reply is JSON. */
  async handleForwarded(body: string): Promise<string> {
    const node = this.node;
    const cmd = JSON.parse(body) as ShardRequest;
    if (cmd.type === "graph.describe") return JSON.stringify({ v: await super.request(cmd) });
    if (cmd.type === "run.observe") {
      // answered where the run's events are: this node's hub (and its shard's gate)
      this.remote?.publish(cmd.runId, cmd.threadId);
      if (this.hub.isGated(cmd.runId)) {
        this.hub.markObserved(cmd.runId);
        await this.local(cmd);
      }
      return JSON.stringify({ v: { gated: true } });
    }
    if (cmd.type === "run.output") {
      const { output } = await this.local(cmd);
      return JSON.stringify({ v: { output: output && Buffer.from(output).toString("utf8") } });
    }
    if (node === undefined || this.closing || node.isDraining) return MOVED;
    const t = cmd.threadId;
    const taking = this.acquiring.get(t);
    if (taking !== undefined) await taking;
    if (node.epochOf(t) === undefined) return MOVED;
    if (cmd.type === "run.create") {
      // a protocol run's opening announcement (input.answered) is made by the session of the node running it
      const opener = (cmd as ForwardedCreate).opener;
      delete (cmd as ForwardedCreate).opener;
      const announced = opener && this.hub.protocol.announceWhenAdopted(cmd.runId, opener.method, opener.channel, opener.data);
      const run = await this.local(cmd).catch((err: unknown) => {
        announced?.cancel();
        throw err;
      });
      this.created(cmd, run);
      this.remote?.publish(run.run_id, run.thread_id); // its sender listens already (expectFrom)
      return JSON.stringify({ v: run });
    }
    const value = await this.local(cmd);
    if (cmd.type === "thread.delete" && (value as { deleted: boolean }).deleted) {
      this.hub.threads.close(t);
      this.hub.protocol.close(t);
    }
    return JSON.stringify({ v: value });
  }

  /** The takeover scan took an expired lease: recover the thread's runs here before anything else runs on it. */
  async takeOver(lease: Lease): Promise<void> {
    const done = this.recoverThread(lease.threadId, lease.epoch);
    this.acquiring.set(lease.threadId, done);
    try {
      if (!(await done)) throw new Error(`thread ${lease.threadId}: not recovered`);
    } finally {
      if (this.acquiring.get(lease.threadId) === done) this.acquiring.delete(lease.threadId);
    }
  }

  /** Leases the heartbeat could not renew: their actors stop now, writing nothing more. */
  leasesLost(threadIds: string[]): void {
    for (const threadId of threadIds) {
      log.warn("thread lease lost: its actor stops", { threadId });
      super.request({ type: "thread.abandon", threadId }).catch(() => undefined);
    }
  }

  /**
   * Idle leases the node is releasing (their linger ran out; ClusterNode `onLeasesReleased`): the
   * shards drop their fences (no actor is there: no command reached one since it went idle). The
   * port keeps the order: a later take's thread.recover comes after this.
   */
  leasesReleased(threadIds: string[]): void {
    for (const threadId of threadIds) super.request({ type: "thread.abandon", threadId }).catch(() => undefined);
  }

  protected override threadIdle(threadId: string): void {
    const node = this.node;
    if (node === undefined || (this.inflight.get(threadId) ?? 0) > 0 || this.acquiring.has(threadId) || this.chains.has(threadId)) return;
    // the lease lingers, fence and all: the thread's next command within the linger finds it held
    // here (no acquire, no recovery); the node releases idle leases in batches (node.ts)
    node.idle(threadId);
  }

  /**
   * A shard's write under the thread's holding `epoch` was refused by the fence: the lease moved
   * before the heartbeat noticed. The holding goes now (not at the next beat), so the thread's next
   * command is routed to its new owner; the shard already stopped the actor and refuses the
   * thread's commands until it hears from here (thread.abandon drops its fence and that refusal).
   */
  protected override threadRefused(threadId: string, epoch: number): void {
    const node = this.node;
    if (node === undefined || !node.lost(threadId, epoch)) return;
    log.warn("thread lease moved (a write was refused): routing to its new owner", { threadId });
    this.remote?.movedAway([threadId]);
    super.request({ type: "thread.abandon", threadId }).catch(() => undefined);
  }

  /**
   * A shard died: its actors (runs in flight, queues) and its fences are gone, so its threads'
   * leases are handed over at once. A takeover scan (this node's or another's) recovers their
   * runs from storage; a command meanwhile takes the lease again with a recovery.
   */
  protected override shardDied(index: number): void {
    const node = this.node;
    if (node === undefined) return;
    const lost = node
      .holdings()
      .map(([threadId]) => threadId)
      .filter((threadId) => shardOf(threadId, this.size) === index);
    if (lost.length === 0) return;
    log.warn("actor shard died: its threads' leases are handed over", { shard: index, threads: lost.length });
    // readers elsewhere of their runs are told once the leases show it (they look the owner up)
    node.handOver(lost).then(
      () => this.remote?.movedAway(lost),
      (err: unknown) => log.warn("lease hand-over failed", { shard: index, err }),
    );
  }

  // --- routing ---------------------------------------------------------------------------------

  /**
   * Posts to this node's shard. An actor command (not run.observe / run.output, which the shard
   * answers itself) is counted until answered, and ends its thread's linger: the actor it reaches
   * tells when it is idle again (thread.idle), so the lease lingers anew from then.
   */
  private local<C extends ThreadRequest>(cmd: C): Routed<C> {
    if (cmd.type === "run.observe" || cmd.type === "run.output") return super.request(cmd);
    const t = cmd.threadId;
    this.node?.busy(t);
    this.inflight.set(t, (this.inflight.get(t) ?? 0) + 1);
    const reply = super.request(cmd);
    const settled = () => {
      const n = (this.inflight.get(t) ?? 1) - 1;
      if (n > 0) this.inflight.set(t, n);
      else this.inflight.delete(t);
    };
    reply.then(settled, settled);
    return reply;
  }

  /** In the thread's issue order: the command is posted (here) or committed (to the owner) before the next one is routed. */
  private async routed(node: ClusterNode, cmd: ThreadRequest): Promise<unknown> {
    const t = cmd.threadId;
    const before = this.chains.get(t);
    let routedHere!: () => void;
    const turn = new Promise<void>((resolve) => (routedHere = resolve));
    const chain = (before ?? Promise.resolve()).then(() => turn);
    this.chains.set(t, chain);
    let reply: () => Promise<unknown>;
    try {
      await before;
      reply = await this.dispatch(node, cmd, Date.now() + ROUTE_DEADLINE_MS);
    } finally {
      routedHere();
      if (this.chains.get(t) === chain) this.chains.delete(t);
    }
    return reply();
  }

  /** Finds where the command runs and sends it there; resolves (with a way to await the reply) once it is posted or committed. */
  private async dispatch(node: ClusterNode, cmd: ThreadRequest, deadline: number): Promise<() => Promise<unknown>> {
    const t = cmd.threadId;
    // a take prepareThread started that failed: the thread is another node's, look its owner up
    let tried = false;
    for (let attempt = 0; ; attempt++) {
      const taking = this.acquiring.get(t);
      if (taking !== undefined) {
        const prepared = this.prepared.get(t) === taking;
        tried = !(await taking) && prepared;
      }
      if (this.closing) throw new TroupeError("UNAVAILABLE", "Server is shutting down");
      if (node.epochOf(t) !== undefined) {
        const reply = this.local(cmd);
        return () => reply;
      }
      const needsLease = !(cmd.type === "run.observe" || cmd.type === "run.output" || cmd.type === "thread.recover" || cmd.type === "thread.abandon");
      // a thread nobody holds (the common case: new threads, and threads idle since their last run)
      // is taken at once: one upsert instead of a lookup first; only a lost race looks the owner up
      if (attempt === 0 && !tried && needsLease && !node.isDraining && (await this.take(node, t))) continue;
      const owner = await node.ownerOf(t);
      if (owner !== undefined && !owner.expired && owner.nodeId !== node.nodeId) {
        if (cmd.type === "run.observe") {
          await this.observeAt(owner.nodeId, t, cmd.runId);
          return () => Promise.resolve({ gated: true });
        }
        let forwarded: ThreadRequest | ForwardedCreate = cmd;
        if (cmd.type === "run.create") {
          await this.remote?.expectFrom(owner.nodeId, t, cmd.runId, true);
          const opener = this.hub.protocol.takeOpener(cmd.runId);
          if (opener !== undefined) forwarded = { ...cmd, opener };
        }
        const sent = await node.commands.send(owner.nodeId, JSON.stringify(forwarded));
        const reply = () => this.forwardedReply(node, cmd, sent, deadline, "opener" in forwarded ? forwarded.opener : undefined);
        if (cmd.type !== "run.create") return reply;
        return () =>
          reply().catch((err: unknown) => {
            this.remote?.unsettled(cmd.runId);
            throw err;
          });
      }
      // nobody holds it (or its holder's lease ran out): shard commands need no lease
      if (!needsLease) {
        const reply = super.request(cmd);
        return () => reply;
      }
      // a row under this node's own id that it does not hold (released or lost, not yet gone): expired at once, then taken
      const ghost = owner !== undefined && !owner.expired && owner.nodeId === node.nodeId;
      if (ghost) await node.reclaim(owner);
      const free = owner === undefined || owner.expired || ghost;
      if (free && !node.isDraining && (await this.take(node, t))) continue;
      // lost the race, our own release in flight, or draining: look again shortly
      if (Date.now() > deadline) throw new TroupeError("UNAVAILABLE", "The node owning this thread cannot be reached; retry the request");
      await sleep(Math.min(50 * 2 ** attempt, 1_000));
    }
  }

  private async forwardedReply(node: ClusterNode, cmd: ThreadRequest, sent: SentCommand, deadline: number, opener?: ProtocolOpener): Promise<unknown> {
    const waits = cmd.type === "run.cancel" && cmd.wait;
    const result = await sent.reply(waits ? FORWARD_WAIT_TIMEOUT_MS : FORWARD_TIMEOUT_MS);
    switch (result.status) {
      case "replied": {
        const reply = JSON.parse(result.body) as ForwardedReply;
        if ("v" in reply) return decodeReply(cmd, reply.v);
        break; // moved: route again
      }
      case "failed":
        throw deserializeError(result.error);
      case "no-reply":
        throw new TroupeError("UNAVAILABLE", "The node owning this thread did not answer in time; retry the request");
      case "not-taken":
        break; // never ran: route again
    }
    if (cmd.type === "run.create") this.remote?.unsettled(cmd.runId); // its owner did not create it: not followed there
    // routed again: the opener goes with it (or is announced here)
    if (opener !== undefined && cmd.type === "run.create") this.hub.protocol.announceWhenAdopted(cmd.runId, opener.method, opener.channel, opener.data);
    if (Date.now() > deadline) throw new TroupeError("UNAVAILABLE", "The node owning this thread cannot be reached; retry the request");
    await sleep(100);
    return (await this.dispatch(node, cmd, deadline))();
  }

  /**
   * Takes the thread's lease and recovers its runs here (one at a time per thread); false when
   * another node was first. A lease the acquire inserted with no run of the thread active needs
   * no recovery read (leases.ts): the shard only fences the thread, posted ahead of the command
   * (the port keeps the order), not awaited.
   */
  private take(node: ClusterNode, threadId: string): Promise<boolean> {
    const existing = this.acquiring.get(threadId);
    if (existing !== undefined) return existing;
    const taking = (async () => {
      const lease = await node.acquire(threadId, true);
      if (lease === undefined) return false;
      if (!lease.recover) {
        super
          .request({ type: "thread.recover", threadId, epoch: lease.epoch, fenceOnly: true, thread: lease.thread, noCheckpoints: lease.noCheckpoints })
          .catch((err: unknown) => {
            // its shard is restarting (the command fails too): no fence there, so no holding here
            log.warn("thread fence failed", { threadId, err });
            node.handOver([threadId]).catch(() => undefined);
          });
        return true;
      }
      if (await this.recoverThread(threadId, lease.epoch, lease.thread, lease.noCheckpoints)) return true;
      // not deleted: its runs may wait in storage; the row expired now lets a takeover scan retry
      await node.handOver([threadId]).catch(() => undefined);
      return false;
    })();
    this.acquiring.set(threadId, taking);
    void taking
      .catch(() => false)
      .finally(() => {
        if (this.acquiring.get(threadId) === taking) this.acquiring.delete(threadId);
      });
    return taking;
  }

  /** The thread's pending and running runs go to its actor on this node (recovery.ts, one thread). */
  private async recoverThread(threadId: string, epoch: number, thread?: ThreadRecord | null, noCheckpoints?: boolean): Promise<boolean> {
    try {
      const { runs } = await super.request({ type: "thread.recover", threadId, epoch, thread, noCheckpoints });
      if (runs > 0) log.info("thread taken over: runs recovered", { threadId, runs });
      return true;
    } catch (err) {
      log.error("thread recovery failed", { threadId, err });
      return false;
    }
  }

  /** Asks the node running a run to publish it on its channel (after listening there). */
  private async observeAt(owner: string, threadId: string, runId: string): Promise<void> {
    const node = this.node;
    if (node === undefined) return;
    await this.remote?.expectFrom(owner, threadId, runId);
    const sent = await node.commands.send(owner, JSON.stringify({ type: "run.observe", threadId, runId, replay: true } satisfies ShardRequest));
    // the reply only says it was asked; a lost one is covered by the run's watch
    void sent.reply(FORWARD_TIMEOUT_MS).catch(() => undefined);
  }
}

/** A forwarded reply's value as the local shard would have answered it. */
function decodeReply(cmd: ThreadRequest, value: unknown): unknown {
  if (cmd.type === "run.output") {
    const text = (value as { output: string | null }).output;
    return { output: text === null ? null : Buffer.from(text, "utf8") } satisfies ShardReplies["run.output"];
  }
  return value;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());
