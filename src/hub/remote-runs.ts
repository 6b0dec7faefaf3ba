// Cluster: runs executing on another node, read from this one (docs/CLUSTER.md "Remote streams").
// The owner's run hub is subscribed on the owner and its events and end are published on the run's
// bus channel (`run.<run_id>`); a reader's node subscribes to that channel first, then asks the
// owner to publish (run.observe, or the create it forwarded), and feeds what arrives into its own
// run hub, where /wait, /join and the streams find it as if the run were local.
/*
 * Every run a request on this node waits for or streams is also watched, so that its end reaches
 * its waiters even when it never arrives on the channel (the owner died, the lease moved, the
 * channel lost it); one timer looks at all of them once a second. A run followed at a remote
 * holding is not read while that holding stands: its end comes on the channel. What could stop it
 * is looked at for all followed runs at once: once a second one statement reads the
 * registrations of the nodes they execute on (dead, gone or restarted → each of their runs is
 * read), every fifth second one statement finds the followed holdings whose lease moved (→ those
 * runs are read); a bus gap (a reconnect: NOTIFYs may be lost)
 * has each run read once. A run read is then read once a second (its record: a final status ends
 * it here; its lease: a new owner is asked to publish in turn) until it is followed at a standing
 * remote holding again. A watch's first look reads the record once (a run joined after it ended),
 * except for a create this node forwarded (its owner publishes it from its start). A run created
 * on this node's shard is not read while the holding it was created under lasts: its actor is
 * here and its end reaches the hub from the shard, as on one node; once that holding goes (lost or
 * handed over) the reads start. Event ids are the run's own sequence: replays from the start are
 * dropped up to the last id delivered, a new attempt (its `metadata` event names it) starts over.
 */
import type { RunDone, RunEvent } from "../bridge/messages.ts";
import { channelName } from "../cluster/bus-envelope.ts";
import type { BusGap, BusMessage } from "../cluster/bus.ts";
import type { ClusterNode } from "../cluster/node.ts";
import { isFinal } from "../domain/lifecycle.ts";
import { componentLog } from "../log/logger.ts";
import type { RunsPort, ThreadsPort } from "../storage/port.ts";
import type { RunHub, RunStreams, RunSubscriber } from "./run-hub.ts";

const log = componentLog("remote-runs");

/** How often the watched runs are looked at (one timer for all: their nodes' registrations, then each run's record when it is not followed at a standing remote holding). */
const WATCH_MS = 1_000;
/** Every how many looks at the nodes the followed holdings' leases are looked at too. */
const LEASE_LOOK_EVERY = 5;
/** How many times a run's end is sent on its channel before giving up (backing off 0.5 s, 1 s, ...). */
const END_PUBLISH_TRIES = 6;

/**
 * What goes over a run's channel: its start, events and end; `m`, the publisher gave the run's
 * thread up while alive (a dead shard, a refused write): readers look at the run at once.
 */
type RunChannelMessage =
  { s: { resumable: boolean } } | { e: RunEvent[] } | { d: { status: RunDone["status"]; threadStatus: RunDone["threadStatus"]; output?: string } } | { m: 1 };

interface Watch {
  runId: string;
  threadId: string;
  /** the holding (node id and epoch) last asked to publish this run; "self" when this node runs it */
  observedAt: string | undefined;
  /** the epoch of this node's holding the run was created under on its shard: no reads while it lasts */
  localEpoch: number | undefined;
  unsubscribe: (() => Promise<void>) | undefined;
  subscribing: Promise<void> | undefined;
  lastId: number;
  attempt: number;
  /** a look at it is in flight (a slow one, e.g. a forward to its owner, holds up no other watch) */
  looking: boolean;
  ended: boolean;
  /** consecutive looks that found the run final (or its record missing) while its end had not arrived */
  endedSeen: number;
  /** its record is read at the next look even while it is followed at a remote holding */
  stale: boolean;
}

/** The remote holding a watch follows (node id, and its epoch once known), if it follows one. */
function remoteHolding(w: Watch): { nodeId: string; epoch: number | undefined } | undefined {
  const at = w.observedAt;
  if (at === undefined || at === "self") return undefined;
  const i = at.lastIndexOf("@");
  return i < 0 ? { nodeId: at, epoch: undefined } : { nodeId: at.slice(0, i), epoch: Number(at.slice(i + 1)) };
}

export interface RemoteRunsDeps {
  hub: RunHub;
  node: ClusterNode;
  schema: string;
  runs: RunsPort;
  threads: ThreadsPort;
  /** asks `nodeId` (the run's thread's owner) to publish the run on its channel */
  observeAt(nodeId: string, threadId: string, runId: string): Promise<void>;
  /** the output of a run that ended on this node without it (the pool's runOutput) */
  outputOf(done: RunDone): Promise<Uint8Array | undefined>;
}

export class RemoteRuns {
  private readonly watches = new Map<string, Watch>();
  /** runs this node publishes for readers elsewhere: their thread, how many publications are open */
  private readonly publishing = new Map<string, { threadId: string; open: number }>();
  private closed = false;
  /** the one timer looking at every watched run (and the nodes and leases of followed ones) */
  private tickTimer: NodeJS.Timeout | undefined;
  private looks = 0;
  /** nodes followed runs execute on that the last look found dead or gone: their runs are read */
  private readonly deadNodes = new Set<string>();
  /** the instance of each followed node at the last look (a new one: it restarted, its runs are read) */
  private readonly instances = new Map<string, string>();

  constructor(private readonly deps: RemoteRunsDeps) {}

  /** The run streams request handlers use: the hub's, with every waited or streamed run watched. */
  view(): RunStreams {
    const hub = this.deps.hub;
    return {
      doneOf: (runId) => hub.doneOf(runId),
      drop: (runId) => hub.drop(runId),
      gatedRunsOf: (threadId) => hub.gatedRunsOf(threadId),
      isAwaitedGated: (runId) => hub.isAwaitedGated(runId),
      waitFor: (runId) => {
        this.watch(runId);
        return hub.waitFor(runId);
      },
      subscribe: (runId, from, sub) => {
        this.watch(runId);
        if (typeof from !== "number") return hub.subscribe(runId, from, sub);
        // the owner replays from the start: a reader resuming after `from` gets only what follows
        const after: RunSubscriber = { onEvent: (e) => e.id > from && sub.onEvent(e), onDone: (d) => sub.onDone(d) };
        return hub.subscribe(runId, from, after);
      },
    };
  }

  /**
   * Before a create is forwarded to the thread's owner (`forwardedCreate`), or the owner is asked
   * to publish a run: listen on the run's channel (the owner publishes the run from its start) and
   * watch the run. A forwarded create's record is not read: the owner publishes it from its start
   * once created (a create that fails or is routed again: `unsettled`).
   */
  async expectFrom(ownerNodeId: string, threadId: string, runId: string, forwardedCreate = false): Promise<void> {
    const w = this.watchOf(runId, threadId);
    w.observedAt = ownerNodeId;
    if (forwardedCreate) w.stale = false;
    await this.listen(w);
  }

  /** A forwarded create did not answer a run (failed, or routed again): its watch reads its record at its next look. */
  unsettled(runId: string): void {
    const w = this.watches.get(runId);
    if (w !== undefined) w.stale = true;
  }

  /**
   * A run create answered: watches the run. Created on this node's shard (its thread held here, the
   * create not forwarded: no watch yet), it is not read while that holding lasts.
   */
  created(runId: string, threadId: string): void {
    if (this.closed || this.watches.has(runId) || this.deps.hub.doneOf(runId) !== undefined) return;
    const w = this.watchOf(runId, threadId);
    w.localEpoch = this.deps.node.epochOf(threadId);
    if (w.localEpoch !== undefined) w.observedAt = "self";
    else this.follow(w).catch((err: unknown) => log.warn("watching a run failed", { runId, err }));
  }

  /** Watches a run a request here reads (its thread looked up when not given). */
  watch(runId: string, threadId?: string): void {
    if (this.closed || this.watches.has(runId) || this.deps.hub.doneOf(runId) !== undefined) return;
    const start = async () => {
      const t = threadId ?? (await this.deps.runs.threadOf(runId));
      if (t === undefined || this.watches.has(runId)) return;
      const w = this.watchOf(runId, t);
      await this.follow(w);
    };
    start().catch((err: unknown) => log.warn("watching a run failed", { runId, err }));
  }

  /** Publishes a run of this node on its channel, from its start, until it ends (a reader elsewhere asked). */
  publish(runId: string, threadId: string): void {
    const { hub, node } = this.deps;
    const channel = channelName(this.deps.schema, "run", runId);
    const publication = this.publishing.get(runId);
    if (publication === undefined) this.publishing.set(runId, { threadId, open: 1 });
    else publication.open++;
    let batch: RunEvent[] = [];
    let flushQueued = false;
    const send = (message: RunChannelMessage) =>
      node.bus.publish(channel, JSON.stringify(message)).catch((err: unknown) => log.warn("run channel publish failed", { runId, err }));
    // the end is what readers elsewhere wait for, and nothing after it would show them a hole: it is
    // sent until it goes out (a later try's sequence shows the hole: readers re-observe and read the record)
    const sendEnd = async (message: RunChannelMessage) => {
      for (let attempt = 0; ; attempt++) {
        try {
          return await node.bus.publish(channel, JSON.stringify(message));
        } catch (err) {
          log.warn("run end publish failed", { runId, attempt, err });
          if (attempt >= END_PUBLISH_TRIES - 1 || this.closed) return;
          await new Promise((resolve) => setTimeout(resolve, 500 * 2 ** attempt).unref());
        }
      }
    };
    const flush = () => {
      flushQueued = false;
      if (batch.length === 0) return;
      void send({ e: batch });
      batch = [];
    };
    void send({ s: { resumable: hub.isResumable(runId) } });
    hub.subscribe(runId, "start", {
      onEvent: (e) => {
        batch.push(e);
        if (!flushQueued) {
          flushQueued = true;
          setImmediate(flush); // one NOTIFY per event-loop turn
        }
      },
      onDone: (done) => {
        flush();
        void this.deps
          .outputOf(done)
          .catch(() => undefined)
          .then((output) => sendEnd({ d: { status: done.status, threadStatus: done.threadStatus, output: output && Buffer.from(output).toString("utf8") } }))
          .finally(() => {
            const p = this.publishing.get(runId);
            if (p !== undefined && --p.open > 0) return;
            this.publishing.delete(runId);
            node.bus.endStream(channel);
          });
      },
    });
  }

  /**
   * This node gave these threads' holdings up while it lives (a dead shard, a refused write): the
   * readers elsewhere of the runs it publishes for them are told, so they look at those runs at
   * their next look instead of at their next lease look (up to 5 s).
   */
  movedAway(threadIds: readonly string[]): void {
    if (this.publishing.size === 0) return;
    const moved = new Set(threadIds);
    for (const [runId, p] of this.publishing) {
      if (!moved.has(p.threadId)) continue;
      const message: RunChannelMessage = { m: 1 };
      void this.deps.node.bus
        .publish(channelName(this.deps.schema, "run", runId), JSON.stringify(message))
        .catch((err: unknown) => log.warn("run channel publish failed", { runId, err }));
    }
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.tickTimer);
    for (const w of this.watches.values()) this.end(w);
  }

  private watchOf(runId: string, threadId: string): Watch {
    let w = this.watches.get(runId);
    if (w === undefined) {
      w = {
        runId,
        threadId,
        observedAt: undefined,
        localEpoch: undefined,
        unsubscribe: undefined,
        subscribing: undefined,
        lastId: -1,
        attempt: 0,
        looking: false,
        ended: false,
        endedSeen: 0,
        stale: true,
      };
      this.watches.set(runId, w);
      this.scheduleTick();
    }
    return w;
  }

  /** One look at the run's record: ended → end it here; still active → follow its thread's owner. */
  private async check(w: Watch): Promise<void> {
    if (w.ended) return;
    if (this.deps.hub.doneOf(w.runId) !== undefined) return this.end(w);
    if (w.localEpoch !== undefined && this.deps.node.epochOf(w.threadId) === w.localEpoch) return; // its end comes from the shard
    const followed = remoteHolding(w);
    if (!w.stale && followed !== undefined && !this.deadNodes.has(followed.nodeId)) return; // its end comes on the channel
    w.stale = false;
    try {
      const run = await this.deps.runs.get(w.threadId, w.runId);
      if (run === undefined || isFinal(run.status)) {
        w.stale = true; // looked at again until it ends
        // its end normally arrives right after its commit (from the shard or the channel): only an
        // end still missing at the next look (a run not yet committed: five) is made up from the record
        // (no node was asked to publish it — it ended before anyone held it for us to ask — its end comes from the record now)
        w.endedSeen++;
        if (w.endedSeen < (run === undefined ? 5 : w.observedAt === undefined ? 1 : 2)) return;
        if (this.deps.hub.doneOf(w.runId) === undefined) {
          const thread = run && (await this.deps.threads.get(w.threadId));
          // a run whose record went (its thread deleted) ends as an error, as its readers would see it upstream
          const done: RunDone = { runId: w.runId, threadId: w.threadId, status: run?.status ?? "error", threadStatus: thread?.status ?? "deleted" };
          this.deps.hub.finished(done, true);
        }
        return this.end(w);
      }
      w.endedSeen = 0;
      await this.follow(w);
    } catch (err) {
      w.stale = true;
      log.warn("run watch failed", { runId: w.runId, err });
    }
  }

  /**
   * One timer for all watches, armed while there is any: a node following a thousand runs wakes
   * once a second, not a thousand times. The nodes' look finishes before the next is armed.
   */
  private scheduleTick(): void {
    if (this.tickTimer !== undefined || this.closed) return;
    this.tickTimer = setTimeout(
      () =>
        void this.tick().finally(() => {
          this.tickTimer = undefined;
          if (this.watches.size > 0) this.scheduleTick();
        }),
      WATCH_MS,
    );
    this.tickTimer.unref();
  }

  /** The nodes (and leases) of followed runs first, so a run they mark is read in this same look; then each run not still being looked at. */
  private async tick(): Promise<void> {
    await this.look();
    for (const w of this.watches.values()) {
      if (w.looking) continue;
      w.looking = true;
      void this.check(w)
        .catch((err: unknown) => log.warn("run watch failed", { runId: w.runId, err }))
        .finally(() => (w.looking = false));
    }
  }

  /**
   * One look at what could keep the end of runs followed at remote holdings from arriving, for all
   * of them at once: their nodes' registrations (one statement), and every LEASE_LOOK_EVERY looks
   * their leases (one statement). A run whose node is dead, gone or restarted, or whose lease moved,
   * is read at its next look.
   */
  private async look(): Promise<void> {
    const byNode = new Map<string, Watch[]>();
    for (const w of this.watches.values()) {
      const h = remoteHolding(w);
      if (h === undefined || w.ended) continue;
      const ws = byNode.get(h.nodeId);
      if (ws === undefined) byNode.set(h.nodeId, [w]);
      else ws.push(w);
    }
    if (byNode.size === 0) return;
    const { node } = this.deps;
    try {
      const states = await node.nodeStates([...byNode.keys()]);
      this.deadNodes.clear();
      for (const [nodeId, ws] of byNode) {
        const state = states.get(nodeId);
        const known = this.instances.get(nodeId);
        if (state === undefined || !state.alive) {
          this.deadNodes.add(nodeId);
          this.instances.delete(nodeId);
        } else {
          this.instances.set(nodeId, state.instance);
          if (known === undefined || known === state.instance) continue;
        }
        for (const w of ws) w.stale = true;
      }
      for (const nodeId of this.instances.keys()) if (!byNode.has(nodeId)) this.instances.delete(nodeId);
      if (++this.looks % LEASE_LOOK_EVERY !== 0) return;
      const followed = [...byNode.values()].flat();
      const holdings = followed.map((w) => ({ threadId: w.threadId, ...remoteHolding(w)! }));
      const moved = new Set(await node.holdingsGone(holdings));
      for (const w of followed) if (moved.has(w.threadId)) w.stale = true;
    } catch (err) {
      log.warn("looking at followed runs' nodes failed", { err });
    }
  }

  /** Asks the thread's current owner to publish the run, unless it was asked already (or runs here). */
  private async follow(w: Watch): Promise<void> {
    const { node } = this.deps;
    if (node.epochOf(w.threadId) !== undefined) {
      // this node runs it: its events reach the hub from the shard (a remote holding before is over)
      w.observedAt = "self";
      return;
    }
    const owner = await node.ownerOf(w.threadId);
    if (owner === undefined || owner.expired || owner.nodeId === node.nodeId) {
      w.stale = true; // taken over soon: looked at again
      return;
    }
    const holding = `${owner.nodeId}@${owner.epoch}`;
    if (w.observedAt === holding || w.observedAt === owner.nodeId) {
      w.observedAt = holding;
      return;
    }
    await this.listen(w);
    w.observedAt = holding;
    await this.deps.observeAt(owner.nodeId, w.threadId, w.runId);
  }

  private listen(w: Watch): Promise<void> {
    if (w.unsubscribe !== undefined) return Promise.resolve();
    w.subscribing ??= this.deps.node.bus
      .subscribe(channelName(this.deps.schema, "run", w.runId), {
        message: (m) => this.arrived(w, m),
        gap: (gap) => this.gap(w, gap),
      })
      .then((unsubscribe) => {
        if (w.ended) void unsubscribe();
        else w.unsubscribe = unsubscribe;
      });
    return w.subscribing;
  }

  private arrived(w: Watch, m: BusMessage): void {
    if (w.ended) return;
    const hub = this.deps.hub;
    const message = JSON.parse(m.body) as RunChannelMessage;
    if ("s" in message) {
      if (message.s.resumable) hub.expect(w.runId, w.threadId, true);
      return;
    }
    if ("m" in message) {
      w.stale = true; // its holding went: its record and lease are read at the next look
      return;
    }
    if ("e" in message) {
      const fresh: RunEvent[] = [];
      for (const e of message.e) {
        if (e.event === "metadata" && e.id === 0) {
          const attempt = (JSON.parse(e.data) as { attempt?: number }).attempt ?? 1;
          if (attempt > w.attempt) {
            // a new attempt (resumed on another node): its stream starts over
            if (w.attempt > 0) hub.started(w.runId, w.threadId, hub.isResumable(w.runId), attempt, false, true);
            w.attempt = attempt;
            w.lastId = -1;
          }
        }
        if (e.id > w.lastId) {
          fresh.push(e);
          w.lastId = e.id;
        }
      }
      if (fresh.length > 0) hub.events(w.runId, fresh, true);
      return;
    }
    if (!("d" in message)) return; // a kind this version does not know
    if (hub.doneOf(w.runId) === undefined) {
      const d = message.d;
      hub.finished(
        {
          runId: w.runId,
          threadId: w.threadId,
          status: d.status,
          threadStatus: d.threadStatus,
          output: d.output === undefined ? undefined : Buffer.from(d.output, "utf8"),
        },
        true,
      );
    }
    this.end(w);
  }

  /** Messages may be lost: ask the owner again (it replays from the start; what was delivered is skipped). */
  private gap(w: Watch, gap: BusGap): void {
    if (w.ended) return;
    log.warn("run channel gap: observing again", { runId: w.runId, reason: gap.reason });
    w.observedAt = undefined;
    w.stale = true; // its end may be what was lost: its record is read once
    void this.follow(w).catch(() => undefined);
  }

  private end(w: Watch): void {
    if (w.ended) return;
    w.ended = true;
    this.watches.delete(w.runId);
    if (w.unsubscribe) void w.unsubscribe().catch(() => undefined);
  }
}
