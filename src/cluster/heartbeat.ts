// A node's heartbeat: one statement every interval stamps the node's row and renews every lease
// it holds. Leases it could not renew are reported lost, and so are all of them once no beat has
// succeeded for a whole TTL (a partitioned node stops executing before anyone may steal them).
import type { PostgresDb } from "../storage/postgres/pool.ts";
import type { Clock } from "../util/clock.ts";
import type { Lease } from "./leases.ts";
import type { NodeIdentity } from "./nodes.ts";
import { laterSql, nowSql, type Stamp } from "./time.ts";

export interface HeartbeatOptions {
  node: NodeIdentity;
  /** lease and node lifetime from a beat (default 15 s) */
  ttlMs: number;
  /** time between beats (default 5 s: two beats may fail before a lease expires) */
  intervalMs: number;
  /** timers and the local measure of time since the last good beat */
  clock: Clock;
  stamp: Stamp;
  /** leases this node no longer holds: stop their actors' executors at once */
  onLeasesLost(threadIds: string[]): void;
  /** this instance's node row was taken over or removed: it must register again (its leases are lost too) */
  onNodeLost(): void;
  onBeatError?(err: unknown): void;
}

export interface BeatResult {
  nodeAlive: boolean;
  /** nodes alive as of this beat (this one included when nodeAlive): GET /info reads it */
  aliveNodes: number;
  renewed: number;
  lost: string[];
}

export class NodeHeartbeat {
  /** thread id → epoch of the holdings this node renews */
  private readonly held = new Map<string, number>();
  private timerCancel: (() => void) | undefined;
  private inFlight: Promise<BeatResult> | undefined;
  /** local time at which the last successful beat was sent (its leases run at least a TTL from then) */
  private lastGoodSentAt: number;
  private lastAliveNodes = 0;

  constructor(
    private readonly db: PostgresDb,
    private readonly opts: HeartbeatOptions,
  ) {
    this.lastGoodSentAt = opts.clock.now();
  }

  /** Renews `lease` from now on (call right after acquiring it: it runs a TTL from that statement). */
  hold(lease: Pick<Lease, "threadId" | "epoch">): void {
    this.held.set(lease.threadId, lease.epoch);
  }

  /** Stops renewing a thread's lease (after releasing or handing it over). */
  drop(threadId: string): void {
    this.held.delete(threadId);
  }

  /** The epoch of this node's holding of the thread, if it holds it. */
  epochOf(threadId: string): number | undefined {
    return this.held.get(threadId);
  }

  /** nodes alive as of the last good beat (0 before the first) */
  get aliveNodes(): number {
    return this.lastAliveNodes;
  }

  /** [thread id, epoch] of every holding */
  holdings(): [string, number][] {
    return [...this.held];
  }

  get heldCount(): number {
    return this.held.size;
  }

  start(): void {
    if (this.timerCancel !== undefined) return;
    this.lastGoodSentAt = this.opts.clock.now();
    this.schedule();
  }

  /** Stops the loop; resolves once a beat in flight has settled. */
  async stop(): Promise<void> {
    this.timerCancel?.();
    this.timerCancel = undefined;
    await this.inFlight?.catch(() => undefined);
  }

  /** One beat now (the loop calls it; tests and shutdown may too). */
  beat(): Promise<BeatResult> {
    this.inFlight ??= this.send().finally(() => {
      this.inFlight = undefined;
    });
    return this.inFlight;
  }

  private schedule(): void {
    this.timerCancel = this.opts.clock.at(this.opts.clock.now() + this.opts.intervalMs, () => {
      this.checkExpiry();
      if (this.inFlight === undefined) this.beat().catch((err: unknown) => this.opts.onBeatError?.(err));
      if (this.timerCancel !== undefined) this.schedule();
    });
  }

  /** Without a good beat for a TTL, every holding may have been stolen: give them all up. */
  private checkExpiry(): void {
    if (this.held.size === 0 || this.opts.clock.now() - this.lastGoodSentAt < this.opts.ttlMs) return;
    const lost = [...this.held.keys()];
    this.held.clear();
    this.opts.onLeasesLost(lost);
  }

  private async send(): Promise<BeatResult> {
    const sentAt = this.opts.clock.now();
    const sent = [...this.held];
    const { node } = this.opts;
    const result = await this.db.pool.query<{ node_alive: boolean; renewed: string[]; alive_nodes: number }>(
      `
WITH node AS (
  UPDATE cluster_nodes SET heartbeat_at = ${nowSql("$3")}, expires_at = ${laterSql("$3", "$4")}
  WHERE node_id = $1 AND instance = $2 RETURNING 1
), renewed AS (
  UPDATE thread_leases l SET expires_at = ${laterSql("$3", "$4")}
  FROM unnest($5::text[], $6::bigint[]) h(thread_id, epoch)
  WHERE l.thread_id = h.thread_id AND l.epoch = h.epoch AND l.node_id = $1 AND l.expires_at > ${nowSql("$3")}
    AND EXISTS (SELECT 1 FROM node)
  RETURNING l.thread_id
)
SELECT EXISTS (SELECT 1 FROM node) AS node_alive, coalesce((SELECT array_agg(thread_id) FROM renewed), '{}') AS renewed,
  -- the statement's snapshot predates its own update: this node counts by its update
  (SELECT count(*)::int FROM cluster_nodes WHERE expires_at > ${nowSql("$3")} AND NOT (node_id = $1 AND instance = $2))
    + (SELECT count(*)::int FROM node) AS alive_nodes`,
      [node.nodeId, node.instance, this.opts.stamp(), this.opts.ttlMs, sent.map(([t]) => t), sent.map(([, e]) => e)],
    );
    const row = result.rows[0];
    const renewed = new Set(row.renewed);
    // a holding replaced while the beat was out (dropped, or re-acquired with a new epoch) is not judged by it
    const lost = sent.filter(([t, e]) => !renewed.has(t) && this.held.get(t) === e).map(([t]) => t);
    for (const t of lost) this.held.delete(t);
    if (row.node_alive) this.lastGoodSentAt = Math.max(this.lastGoodSentAt, sentAt);
    if (lost.length > 0) this.opts.onLeasesLost(lost);
    if (!row.node_alive) this.opts.onNodeLost();
    this.lastAliveNodes = row.alive_nodes;
    return { nodeAlive: row.node_alive, aliveNodes: row.alive_nodes, renewed: renewed.size, lost };
  }
}
