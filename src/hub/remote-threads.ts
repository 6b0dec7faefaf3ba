// Cluster: thread streams (GET /threads/{t}/stream) and thread-protocol sessions that see the runs
// of every node (docs/CLUSTER.md "Thread streams across nodes").
/*
 * A node with clients listening to a thread *watches* it: it listens on the thread's bus channel
 * (`thread.<thread_id>`) and announces the watch on the cluster's watch channel, waiting for that
 * commit before the client's stream opens. Every other node keeps the set of threads watched
 * elsewhere and, for each, a *relay*: a subscriber of its own thread-stream hub and protocol session
 * for the thread, as if a client of its own listened. So whichever node runs the thread's runs
 * (its lease may move at any time) already treats them as listened to — runs are observed from
 * their create, their events, run_start/run_end and state updates published in the single-node
 * order — and the relay forwards them on the thread's channel, one NOTIFY per event-loop turn.
 * The watching node delivers what arrives to its own clients (inject), numbered by its own hub,
 * so Last-Event-ID resumes as on one node. Runs a node reads from another node's run channel
 * (remote-runs.ts) are not published to its thread streams: the relay of the node running them
 * does that.
 * Watches are re-announced every 5 s (a new node says hello and is answered at once) and expire
 * 15 s after the last announcement: nothing is stored, a killed watcher's relays stop by themselves.
 * Nodes without remote watchers keep no relay: their per-event paths are the single-node ones.
 */
import type { ClusterNode } from "../cluster/node.ts";
import { channelName } from "../cluster/bus-envelope.ts";
import { componentLog } from "../log/logger.ts";
import type { RunHub } from "./run-hub.ts";
import { THREAD_STREAM_MODES, type ThreadStreamMode } from "./thread-stream-hub.ts";

const log = componentLog("remote-threads");

/** How often a node announces the threads it watches; a watch not announced for WATCH_TTL_MS is over. */
const ANNOUNCE_MS = 5_000;
const WATCH_TTL_MS = 15_000;

/** On the watch channel: `w` the threads node `n` watches (all of them when `full`); `hello`: a node asks everyone to announce. */
type WatchMessage = { n: string; w?: string[]; full?: boolean; hello?: true };

/** What a relay sends on a thread's channel, in its hubs' order. */
type ThreadItem =
  /** a thread-stream event: mode, event, data */
  | ["t", ThreadStreamMode, string, string]
  /** a protocol session frame: run id, seq, method, channel, namespace, data */
  | ["p", string, number, string, string, string[], string]
  /** the thread was deleted */
  | ["x"];
type ThreadMessage = { n: string; e: ThreadItem[] };

const ALL_MODES: ReadonlySet<ThreadStreamMode> = new Set(THREAD_STREAM_MODES);

interface LocalWatch {
  /** when a client last asked (a watch is kept at least ANNOUNCE_MS, until its client subscribed) */
  since: number;
  ready: Promise<void>;
  unsubscribe?: () => Promise<void>;
}

interface Relay {
  threadId: string;
  channel: string;
  batch: ThreadItem[];
  queued: boolean;
  closed: boolean;
  stop: () => void;
}

export interface RemoteThreadsDeps {
  hub: RunHub;
  node: ClusterNode;
  schema: string;
  /** a run of the thread whose events its worker holds goes live here (the pool's observeRun, no replay) */
  observe(threadId: string, runId: string): void;
}

export class RemoteThreads {
  /** threads clients of this node listen to */
  private readonly local = new Map<string, LocalWatch>();
  /** threads other nodes watch: node id → when its watch expires (this node's clock) */
  private readonly remote = new Map<string, Map<string, number>>();
  private readonly relays = new Map<string, Relay>();
  private readonly watchChannel: string;
  private unsubscribeWatch: (() => Promise<void>) | undefined;
  private timer: NodeJS.Timeout | undefined;
  private announcedAny = false;
  private closed = false;

  constructor(private readonly deps: RemoteThreadsDeps) {
    this.watchChannel = channelName(deps.schema, "watch", "threads");
  }

  /** Listens to the watch channel and asks the other nodes for their watches. */
  async start(): Promise<void> {
    this.unsubscribeWatch = await this.deps.node.bus.subscribe(this.watchChannel, {
      message: (m) => this.onWatch(m.body),
      gap: () => this.send({ n: this.deps.node.nodeId, hello: true }), // watches may have been missed: ask again
    });
    this.send({ n: this.deps.node.nodeId, hello: true });
    this.schedule();
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    for (const t of [...this.relays.keys()]) this.stopRelay(t);
    for (const w of this.local.values()) void w.ready.then(() => w.unsubscribe?.()).catch(() => undefined);
    this.local.clear();
    void this.unsubscribeWatch?.().catch(() => undefined);
  }

  /**
   * Before a client of this node starts listening to a thread: resolves once the thread's channel
   * is listened to and every node has been told (committed), so the runs that follow reach it.
   */
  watch(threadId: string): Promise<void> {
    if (this.closed) return Promise.resolve();
    const existing = this.local.get(threadId);
    if (existing !== undefined) {
      existing.since = Date.now();
      return existing.ready;
    }
    const w: LocalWatch = { since: Date.now(), ready: Promise.resolve() };
    this.local.set(threadId, w);
    w.ready = (async () => {
      const unsubscribe = await this.deps.node.bus.subscribe(channelName(this.deps.schema, "thread", threadId), {
        message: (m) => this.arrived(threadId, m.body),
        gap: (gap) => log.warn("thread channel gap: events of other nodes may be missing", { threadId, reason: gap.reason }),
      });
      if (this.local.get(threadId) !== w) return void (await unsubscribe());
      w.unsubscribe = unsubscribe;
      await this.deps.node.bus.publish(this.watchChannel, JSON.stringify({ n: this.deps.node.nodeId, w: [threadId] } satisfies WatchMessage));
    })();
    w.ready.catch((err: unknown) => {
      log.warn("watching a thread failed", { threadId, err });
      if (this.local.get(threadId) === w) this.local.delete(threadId);
    });
    return w.ready;
  }

  // ---- the watching side ---------------------------------------------------------------------

  private arrived(threadId: string, body: string): void {
    const m = JSON.parse(body) as ThreadMessage;
    if (m.n === this.deps.node.nodeId) return; // this node's own relay: its clients had the events already
    const { threads, protocol } = this.deps.hub;
    for (const item of m.e) {
      switch (item[0]) {
        case "t":
          threads.inject(threadId, item[1], item[2], item[3]);
          break;
        case "p": {
          const [, runId, seq, method, channel, namespace, data] = item;
          protocol.inject(threadId, runId, m.n, { seq, method, channel, namespace, data, origin: m.n });
          break;
        }
        case "x":
          threads.close(threadId);
          protocol.close(threadId);
          break;
      }
    }
  }

  // ---- the other nodes' side -----------------------------------------------------------------

  private onWatch(body: string): void {
    const m = JSON.parse(body) as WatchMessage;
    if (m.n === this.deps.node.nodeId) return;
    if (m.hello) this.announce();
    if (m.w === undefined) return;
    const expires = Date.now() + WATCH_TTL_MS;
    if (m.full) {
      const listed = new Set(m.w);
      for (const [t, nodes] of this.remote) if (!listed.has(t) && nodes.delete(m.n) && nodes.size === 0) this.unwatched(t);
    }
    for (const t of m.w) {
      let nodes = this.remote.get(t);
      if (nodes === undefined) this.remote.set(t, (nodes = new Map()));
      const fresh = !nodes.has(m.n);
      nodes.set(m.n, expires);
      if (!this.relays.has(t)) this.startRelay(t);
      else if (fresh) this.replaySession(t); // a new watcher gets the protocol session's run so far
    }
  }

  private unwatched(threadId: string): void {
    this.remote.delete(threadId);
    this.stopRelay(threadId);
  }

  private startRelay(threadId: string): void {
    const { hub } = this.deps;
    const relay: Relay = {
      threadId,
      channel: channelName(this.deps.schema, "thread", threadId),
      batch: [],
      queued: false,
      closed: false,
      stop: () => undefined,
    };
    this.relays.set(threadId, relay);
    const closed = () => {
      if (relay.closed) return;
      this.push(relay, ["x"]);
      this.stopRelay(threadId);
    };
    const stopThreads = hub.threads.subscribe(threadId, undefined, {
      relay: true,
      modes: ALL_MODES,
      onEvent: (e) => this.push(relay, ["t", e.mode, e.event, e.data]),
      onClose: closed,
    });
    const session = hub.protocol.subscribe(threadId, undefined, {
      relay: true,
      filter: { channels: [] },
      onEvent: (f) => {
        // frames this node took from another node's session are that node's to relay
        if (f.origin === undefined) this.push(relay, ["p", hub.protocol.sessionRun(threadId) ?? "", f.seq, f.method, f.channel, f.namespace, f.data]);
      },
      onClose: closed,
    });
    relay.stop = () => {
      stopThreads();
      session.unsubscribe();
    };
    // runs of the thread in flight here whose events their worker holds go live (as for a client's stream)
    for (const runId of hub.gatedRunsOf(threadId)) this.deps.observe(threadId, runId);
  }

  /** Sends the session's frames so far again (a watcher that has them drops them by seq). */
  private replaySession(threadId: string): void {
    const relay = this.relays.get(threadId);
    const { protocol } = this.deps.hub;
    if (relay === undefined) return;
    const runId = protocol.sessionRun(threadId) ?? "";
    const { unsubscribe } = protocol.subscribe(threadId, undefined, {
      relay: true,
      filter: { channels: [] },
      onEvent: (f) => f.origin === undefined && this.push(relay, ["p", runId, f.seq, f.method, f.channel, f.namespace, f.data]),
      onClose: () => undefined,
    });
    unsubscribe();
  }

  private stopRelay(threadId: string): void {
    const relay = this.relays.get(threadId);
    if (relay === undefined) return;
    this.relays.delete(threadId);
    relay.closed = true;
    relay.stop();
    this.flush(relay, true);
  }

  private push(relay: Relay, item: ThreadItem): void {
    relay.batch.push(item);
    if (relay.queued) return;
    relay.queued = true;
    setImmediate(() => this.flush(relay, relay.closed)); // one NOTIFY per event-loop turn
  }

  private flush(relay: Relay, last: boolean): void {
    relay.queued = false;
    const { bus, nodeId } = this.deps.node;
    const sent =
      relay.batch.length === 0 ? Promise.resolve() : bus.publish(relay.channel, JSON.stringify({ n: nodeId, e: relay.batch } satisfies ThreadMessage));
    relay.batch = [];
    void sent
      .catch((err: unknown) => log.warn("thread channel publish failed", { channel: relay.channel, err }))
      .finally(() => {
        if (last && !this.relays.has(relay.threadId)) bus.endStream(relay.channel);
      });
  }

  // ---- announcements -------------------------------------------------------------------------

  private schedule(): void {
    if (this.closed) return;
    this.timer = setTimeout(() => {
      this.tick();
      this.schedule();
    }, ANNOUNCE_MS);
    this.timer.unref();
  }

  private tick(): void {
    const now = Date.now();
    const { threads, protocol } = this.deps.hub;
    for (const [t, w] of this.local) {
      if (now - w.since < ANNOUNCE_MS || threads.heldForClients(t, now) || protocol.listenerCount(t) > 0) continue;
      this.local.delete(t);
      void w.ready.then(() => w.unsubscribe?.()).catch(() => undefined);
    }
    this.announce();
    for (const [t, nodes] of this.remote) {
      for (const [n, expires] of nodes) if (expires < now) nodes.delete(n);
      if (nodes.size === 0) this.unwatched(t);
    }
  }

  /** Tells every node which threads this one watches (none, once, after the last watch ended). */
  private announce(): void {
    if (this.local.size === 0 && !this.announcedAny) return;
    this.announcedAny = this.local.size > 0;
    this.send({ n: this.deps.node.nodeId, w: [...this.local.keys()], full: true });
  }

  private send(m: WatchMessage): void {
    if (this.closed) return;
    this.deps.node.bus.publish(this.watchChannel, JSON.stringify(m)).catch((err: unknown) => log.warn("watch channel publish failed", { err }));
  }
}
