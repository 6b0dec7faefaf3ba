// One node of a cluster, put together: its registration, heartbeat, bus, forwarded commands, the
// takeover scan, and the drain. The server starts one per process on the Postgres backend and asks
// it who owns a thread; the pieces are in the modules it composes.
import type { PostgresDb } from "../storage/postgres/pool.ts";
import { systemClock, type Clock } from "../util/clock.ts";
import { NotifyBus } from "./bus.ts";
import { ClusterCommands, type CommandHandler } from "./commands.ts";
import { NodeHeartbeat } from "./heartbeat.ts";
import {
  acquireLease,
  expiredLeases,
  handOverLease,
  handOverLeases,
  handOverNodeLeases,
  holdingsGone,
  leaseOf,
  releaseLease,
  releaseLeases,
  type AcquiredLease,
  type Lease,
  type LeaseState,
} from "./leases.ts";
import { deregisterNode, markDraining, nodeStates, registerNode, type NodeIdentity } from "./nodes.ts";
import { databaseStamp, type Stamp } from "./time.ts";
import type { LeaseTake } from "../storage/port.ts";

export interface ClusterNodeOptions {
  identity: NodeIdentity;
  /** lease and node lifetime (default 15 s) */
  ttlMs?: number;
  /** heartbeat interval (default 5 s) */
  heartbeatMs?: number;
  /** how often expired leases are looked for (default 5 s) */
  takeoverScanMs?: number;
  /** how often this node removes expired bus payload rows (default 30 s; 0: never, a singleton job does: src/server/cluster-jobs.ts) */
  payloadCleanupEveryMs?: number;
  clock?: Clock;
  stamp?: Stamp;
  info?: Record<string, unknown>;
  /** runs a command another node forwarded here */
  handle: CommandHandler;
  /** a thread this node took over from a dead, partitioned or draining node: recover its runs here */
  onTakeover(lease: Lease): Promise<void>;
  /** threads this node no longer owns: stop their executors now (their writes would be refused) */
  onLeasesLost(threadIds: string[]): void;
  /** how long an idle thread's lease is kept before it is released (default LEASE_LINGER_MS) */
  lingerMs?: number;
  /**
   * idle threads whose leases this node gives up now (the linger ran out): called before the
   * release is sent, so their shards drop the fence before the thread can be taken again here
   */
  onLeasesReleased?(threadIds: string[]): void;
  onError?(err: unknown): void;
}

/** Expired leases taken per scan. */
const TAKEOVER_BATCH = 100;

/**
 * How long an idle thread's lease lingers (at least; released in batches every half of it): a
 * thread's next command within it (its run after its create, a follow-up message, a poll) finds
 * the lease held here, with no acquire and no release; 2 s covers a client's think time between
 * requests and keeps a moved-on client's thread pinned here only briefly.
 */
export const LEASE_LINGER_MS = 2_000;
/** Leases released per statement. */
const RELEASE_BATCH = 1_000;

export class ClusterNode {
  readonly bus: NotifyBus;
  readonly commands: ClusterCommands;
  private readonly heartbeat: NodeHeartbeat;
  private readonly clock: Clock;
  private readonly stamp: Stamp;
  private readonly ttlMs: number;
  private cancelScan: (() => void) | undefined;
  private scanning: Promise<void> = Promise.resolve();
  private draining = false;
  private stopped = false;
  /** threads whose lease this node is acquiring (a row of this node's id may stand before its holding is known) */
  private readonly acquiring = new Map<string, number>();
  /** held threads with nothing in flight, in the order they went idle → local time they did */
  private readonly lingering = new Map<string, number>();
  private readonly lingerMs: number;
  private cancelLinger: (() => void) | undefined;
  /** the last batch of lingering leases being released (stop waits for it) */
  private releasing: Promise<void> = Promise.resolve();

  private constructor(
    private readonly db: PostgresDb,
    private readonly opts: ClusterNodeOptions,
  ) {
    this.clock = opts.clock ?? systemClock;
    this.stamp = opts.stamp ?? databaseStamp;
    this.ttlMs = opts.ttlMs ?? 15_000;
    this.lingerMs = opts.lingerMs ?? LEASE_LINGER_MS;
    this.bus = new NotifyBus(db, { clock: this.clock, stamp: this.stamp, cleanupEveryMs: opts.payloadCleanupEveryMs, onError: opts.onError });
    this.commands = new ClusterCommands(db, this.bus, { nodeId: opts.identity.nodeId, handle: opts.handle, onError: opts.onError });
    this.heartbeat = new NodeHeartbeat(db, {
      node: opts.identity,
      ttlMs: this.ttlMs,
      intervalMs: opts.heartbeatMs ?? 5_000,
      clock: this.clock,
      stamp: this.stamp,
      onLeasesLost: (threads) => {
        for (const t of threads) this.lingering.delete(t);
        opts.onLeasesLost(threads);
      },
      onNodeLost: () => {
        if (this.stopped) return; // our own deregistration
        // another process took this node id over (we were presumed dead): stop taking work
        this.draining = true;
        opts.onError?.(new Error(`node ${opts.identity.nodeId}: its registration was taken over; no longer taking leases`));
      },
      onBeatError: opts.onError,
    });
  }

  /**
   * Registers (waiting while a previous instance under the same node id is still alive, at most
   * `waitMs`), opens the bus, takes forwarded commands, and starts beating and scanning.
   */
  static async start(db: PostgresDb, opts: ClusterNodeOptions, waitMs = 30_000): Promise<ClusterNode> {
    const node = new ClusterNode(db, opts);
    const clock = node.clock;
    const deadline = clock.now() + waitMs;
    for (;;) {
      const result = await registerNode(db, opts.identity, { ttlMs: node.ttlMs, stamp: node.stamp, info: opts.info });
      if (result.registered) break;
      if (clock.now() >= deadline)
        throw new Error(`node id ${opts.identity.nodeId} is in use by a live node (its registration runs until ${result.heldUntil.toISOString()})`);
      await new Promise<void>((resolve) => clock.at(clock.now() + 1_000, resolve));
    }
    // the previous process of this node id is dead: its holdings go to the takeover scan now,
    // which runs at once (this node recovers them unless another node's scan is first)
    const inherited = opts.identity.succeeds === undefined ? 0 : await handOverNodeLeases(db, opts.identity.nodeId);
    await node.bus.start();
    await node.commands.start();
    node.heartbeat.start();
    node.scheduleScan(inherited > 0 ? 0 : undefined);
    return node;
  }

  get nodeId(): string {
    return this.opts.identity.nodeId;
  }

  get isDraining(): boolean {
    return this.draining;
  }

  /** Nodes alive as of the last heartbeat (GET /info). */
  get aliveNodes(): number {
    return Math.max(1, this.heartbeat.aliveNodes);
  }

  /** This node's holding of the thread, if it has one. */
  epochOf(threadId: string): number | undefined {
    return this.heartbeat.epochOf(threadId);
  }

  /**
   * Takes the thread's lease if it is free or expired (never while draining); renewed from now on.
   * `recover` says whether the thread may have runs to recover (leases.ts); `readThread`: with the
   * thread's record as stored after it (same round trip).
   */
  async acquire(threadId: string, readThread = false): Promise<AcquiredLease | undefined> {
    if (this.draining || this.stopped) return undefined;
    this.acquiring.set(threadId, (this.acquiring.get(threadId) ?? 0) + 1);
    try {
      const lease = await acquireLease(this.db, threadId, this.nodeId, { ttlMs: this.ttlMs, stamp: this.stamp }, readThread);
      if (lease !== undefined) this.heartbeat.hold(lease);
      return lease;
    } finally {
      const n = (this.acquiring.get(threadId) ?? 1) - 1;
      if (n > 0) this.acquiring.set(threadId, n);
      else this.acquiring.delete(threadId);
    }
  }

  /** What a thread's create needs to take the thread's lease for this node in its own statement (ThreadsPort.createTaking). */
  leaseTake(): LeaseTake {
    return { nodeId: this.nodeId, ttlMs: this.ttlMs, stamp: this.stamp() };
  }

  /**
   * A lease a thread's create took for this node (createTaking): renewed from now on, and
   * lingering as an idle one's (released with them unless a command for the thread comes first).
   * A node stopped meanwhile leaves the row to expire (nothing of the thread is in flight).
   */
  adopt(lease: Pick<Lease, "threadId" | "epoch">): void {
    if (this.stopped) return;
    this.heartbeat.hold(lease);
    this.idle(lease.threadId);
  }

  /**
   * A lease row under this node's id that this node does not hold: a holding it released (the
   * delete in flight) or gave up as lost (the heartbeat could not renew it in time, while a late
   * beat still extended the row). No executor of this node works under it (its actor was abandoned
   * when the holding went), so it is expired now and can be taken at once, instead of every request
   * for the thread waiting out the TTL. A holding being acquired or held is left alone.
   */
  async reclaim(lease: Pick<Lease, "threadId" | "epoch">): Promise<void> {
    if (this.acquiring.has(lease.threadId) || this.heartbeat.epochOf(lease.threadId) !== undefined) return;
    await handOverLease(this.db, lease);
  }

  /** Who holds the thread now (another node's id, this one's, or nobody / expired). */
  ownerOf(threadId: string): Promise<LeaseState | undefined> {
    return leaseOf(this.db, threadId, this.stamp);
  }

  /** Each registered node of `nodeIds`: its instance and whether it is alive (a node without a row is gone). */
  nodeStates(nodeIds: readonly string[]): Promise<Map<string, { instance: string; alive: boolean }>> {
    return nodeStates(this.db, nodeIds, this.stamp);
  }

  /** The threads among `holdings` whose lease no longer stands under that node (and epoch, when given). */
  holdingsGone(holdings: readonly { threadId: string; nodeId: string; epoch: number | undefined }[]): Promise<string[]> {
    return holdingsGone(this.db, holdings, this.stamp);
  }

  /** Gives up a thread that has nothing in flight, now. */
  async release(threadId: string): Promise<void> {
    const epoch = this.heartbeat.epochOf(threadId);
    if (epoch === undefined) return;
    this.heartbeat.drop(threadId);
    this.lingering.delete(threadId);
    await releaseLease(this.db, { threadId, epoch });
  }

  /**
   * A held thread has nothing in flight (its actor went idle): its lease lingers (renewed like any
   * other) for lingerMs, then goes with the other idle ones in one statement, unless `busy` says
   * the thread has work again first. Not held here: nothing to do.
   */
  idle(threadId: string): void {
    if (this.stopped || this.heartbeat.epochOf(threadId) === undefined) return;
    this.lingering.delete(threadId); // re-inserted last: the map stays in idle order
    this.lingering.set(threadId, this.clock.now());
    if (this.cancelLinger === undefined) this.scheduleLingerSweep();
  }

  /** A command for a held thread is on its way to its actor: its lease no longer lingers. */
  busy(threadId: string): void {
    this.lingering.delete(threadId);
  }

  /**
   * A write under the thread's holding `epoch` was refused: the lease moved (another node took it
   * while this one was paused or cut off). The holding is dropped without touching the row (it is
   * the new owner's); a later holding of this node is left alone. True when it was dropped.
   */
  lost(threadId: string, epoch: number): boolean {
    if (this.heartbeat.epochOf(threadId) !== epoch) return false;
    this.heartbeat.drop(threadId);
    this.lingering.delete(threadId);
    return true;
  }

  /** Whether the thread's lease is held here idle, waiting to be released. */
  isLingering(threadId: string): boolean {
    return this.lingering.has(threadId);
  }

  /**
   * Gives threads up at once with whatever they had in flight (their actors are gone: a shard
   * died): their rows stay, expired, so a takeover scan recovers their runs (one statement).
   */
  async handOver(threadIds: readonly string[]): Promise<void> {
    const leases: Pick<Lease, "threadId" | "epoch">[] = [];
    for (const threadId of threadIds) {
      const epoch = this.heartbeat.epochOf(threadId);
      if (epoch === undefined) continue;
      this.heartbeat.drop(threadId);
      this.lingering.delete(threadId);
      leases.push({ threadId, epoch });
    }
    await handOverLeases(this.db, leases);
  }

  /** Threads held here whose holding is known ([thread id, epoch]). */
  holdings(): [string, number][] {
    return this.heartbeat.holdings();
  }

  private scheduleLingerSweep(): void {
    this.cancelLinger = this.clock.at(this.clock.now() + Math.max(1, Math.round(this.lingerMs / 2)), () => {
      this.cancelLinger = undefined;
      this.releaseLingering(this.clock.now() - this.lingerMs);
      if (this.lingering.size > 0 && !this.stopped) this.scheduleLingerSweep();
    });
  }

  /**
   * Releases the leases idle since `idleBefore` or earlier: dropped from the heartbeat and reported
   * (onLeasesReleased) in this turn, so a command arriving from now on takes the thread again,
   * then deleted in one statement per RELEASE_BATCH. A delete that fails leaves rows nobody renews:
   * they expire within the TTL and a takeover scan finds nothing to run.
   */
  private releaseLingering(idleBefore: number): void {
    const leases: Pick<Lease, "threadId" | "epoch">[] = [];
    for (const [threadId, since] of this.lingering) {
      if (since > idleBefore) break; // idle order: the rest went idle later
      this.lingering.delete(threadId);
      const epoch = this.heartbeat.epochOf(threadId);
      if (epoch === undefined) continue;
      this.heartbeat.drop(threadId);
      leases.push({ threadId, epoch });
    }
    if (leases.length === 0) return;
    this.opts.onLeasesReleased?.(leases.map((l) => l.threadId));
    const batches: Promise<unknown>[] = [];
    for (let i = 0; i < leases.length; i += RELEASE_BATCH) batches.push(releaseLeases(this.db, leases.slice(i, i + RELEASE_BATCH)));
    const released = Promise.all(batches).then(
      () => undefined,
      (err: unknown) => this.opts.onError?.(err),
    );
    this.releasing = Promise.all([this.releasing, released]).then(() => undefined);
  }

  /**
   * SIGTERM: takes no new leases, waits for `finish` (running runs ending, at most the grace
   * period: the caller bounds it), then releases its idle leases, hands every other lease still
   * held over to the other nodes and leaves the cluster.
   */
  async drain(finish: () => Promise<void>): Promise<void> {
    this.draining = true;
    await markDraining(this.db, this.opts.identity).catch((err: unknown) => this.opts.onError?.(err));
    await finish();
    await this.stop();
  }

  /**
   * Leaves the cluster: idle leases are released (nothing to recover: the next acquirer starts
   * fresh), the others handed over (expired now, for the takeover scans), the node row removed.
   */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.draining = true;
    this.cancelScan?.();
    this.cancelLinger?.();
    this.cancelLinger = undefined;
    await this.scanning;
    await this.heartbeat.stop();
    this.releaseLingering(Number.POSITIVE_INFINITY);
    await this.releasing;
    const busy = this.heartbeat.holdings().map(([threadId, epoch]) => ({ threadId, epoch }));
    for (const { threadId } of busy) this.heartbeat.drop(threadId);
    for (let i = 0; i < busy.length; i += RELEASE_BATCH)
      await handOverLeases(this.db, busy.slice(i, i + RELEASE_BATCH)).catch((err: unknown) => this.opts.onError?.(err));
    await deregisterNode(this.db, this.opts.identity).catch((err: unknown) => this.opts.onError?.(err));
    await this.commands.close();
    await this.bus.close();
  }

  private scheduleScan(inMs = this.opts.takeoverScanMs ?? 5_000): void {
    if (this.stopped) return;
    this.cancelScan = this.clock.at(this.clock.now() + inMs, () => {
      this.scanning = this.scan()
        .catch((err: unknown) => this.opts.onError?.(err))
        .finally(() => this.scheduleScan());
    });
  }

  /** Takes over expired leases (racing nodes are fine: each thread goes to one) and recovers them. */
  private async scan(): Promise<void> {
    if (this.draining) return;
    const expired = await expiredLeases(this.db, { limit: TAKEOVER_BATCH, stamp: this.stamp });
    for (const old of expired) {
      if (this.draining) return;
      const lease = await this.acquire(old.threadId);
      if (lease === undefined) continue; // another node was first
      try {
        await this.opts.onTakeover(lease);
      } catch (err) {
        // not recovered here: let another node try
        this.opts.onError?.(err);
        this.heartbeat.drop(lease.threadId);
        await handOverLease(this.db, lease).catch(() => undefined);
      }
    }
  }
}
