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
import { randomUUID } from "node:crypto";
import type { ClusterNode } from "../cluster/node.ts";
import { shardOf } from "../bridge/sharding.ts";
import { channelName } from "../cluster/bus-envelope.ts";
import { componentLog } from "../log/logger.ts";
import type { RunHub } from "./run-hub.ts";
import { THREAD_STREAM_MODES, type ThreadStreamEvent, type ThreadStreamMode } from "./thread-stream-hub.ts";

const log = componentLog("remote-threads");

/** How often a node announces the threads it watches; a watch not announced for WATCH_TTL_MS is over. */
const ANNOUNCE_MS = 5_000;
const WATCH_TTL_MS = 15_000;

/** Thread-stream ids of a node step by this from its tag: ids up to 2^53 / 8192 ≈ 10^12 events per process. */
export const THREAD_ID_STEP = 8192;
/** The tag of a node's thread-stream ids (ThreadStreamHub.tagIds): FNV-1a of its id, 1..8191. */
export const threadIdTag = (nodeId: string): number => 1 + shardOf(nodeId, THREAD_ID_STEP - 1);

/**
 * On the watch channel: `w` the threads node `n` watches (all of them when `full`); `hello`: a node
 * asks everyone to announce; `p`: node `to` is asked to serve a client's stream from its buffer
 * (a reconnect with its id reached `n`), `pe`: that stream ended, `px`: streams `n` still reads.
 */
type WatchMessage = {
  n: string;
  w?: string[];
  full?: boolean;
  hello?: true;
  p?: { id: string; t: string; to: string; after: number; modes: ThreadStreamMode[] };
  pe?: string;
  px?: string[];
};

/** On a served stream's channel: events (with the serving node's ids), its end, a keepalive. */
type ServedMessage = { e: [number, ThreadStreamMode, string, string][] } | { end: true } | { k: 1 };

/** A thread stream another node serves for a client of this one (RemoteThreads.streamFrom). */
export interface RemoteThreadStream {
  /** starts delivering (what arrived meanwhile first); returns the stop for a client that left */
  open(deliver: (e: ThreadStreamEvent) => void, end: () => void): () => void;
}

/** A client's stream here, served by another node. */
interface Proxied {
  id: string;
  lastHeard: number;
  early: ThreadStreamEvent[];
  deliver?: (e: ThreadStreamEvent) => void;
  end?: () => void;
  ended: boolean;
  unsubscribe?: () => Promise<void>;
}

/** A stream this node serves for a client of another node. */
interface Served {
  id: string;
  channel: string;
  refreshed: number;
  batch: ServedMessage[];
  events: [number, ThreadStreamMode, string, string][];
  queued: boolean;
  stop: () => void;
}

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
  private readonly proxied = new Map<string, Proxied>();
  private readonly served = new Map<string, Served>();
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
    for (const p of [...this.proxied.values()]) this.endProxied(p, false);
    for (const id of [...this.served.keys()]) this.stopServing(id);
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

  /**
   * A client reconnected here with a Last-Event-ID another node gave out (a load balancer chose
   * this node): that node, still watching the thread, serves the stream from its buffer after that
   * id and then live, over a channel of the stream's own; its ids stay that node's, so the next
   * reconnect anywhere resumes the same way. Undefined when no node watching the thread has the
   * id's tag (it is gone, or its buffer expired): the stream is then live from here.
   */
  async streamFrom(threadId: string, after: number, modes: ReadonlySet<ThreadStreamMode>): Promise<RemoteThreadStream | undefined> {
    const tag = after % THREAD_ID_STEP;
    const owner = [...(this.remote.get(threadId)?.keys() ?? [])].find((n) => threadIdTag(n) === tag);
    if (owner === undefined || this.closed) return undefined;
    const id = randomUUID();
    const p: Proxied = { id, lastHeard: Date.now(), early: [], ended: false };
    this.proxied.set(id, p);
    try {
      p.unsubscribe = await this.deps.node.bus.subscribe(channelName(this.deps.schema, "tsp", id), {
        message: (m) => this.fromServer(p, m.body),
        gap: () => this.endProxied(p, true), // the client reconnects and resumes from its last id
      });
      const request: WatchMessage = { n: this.deps.node.nodeId, p: { id, t: threadId, to: owner, after, modes: [...modes] } };
      await this.deps.node.bus.publish(this.watchChannel, JSON.stringify(request));
    } catch (err) {
      this.endProxied(p, false);
      throw err;
    }
    return {
      open: (deliver, end) => {
        p.deliver = deliver;
        p.end = end;
        for (const e of p.early.splice(0)) deliver(e);
        if (p.ended) end();
        return () => this.endProxied(p, true);
      },
    };
  }

  private fromServer(p: Proxied, body: string): void {
    if (p.ended) return;
    p.lastHeard = Date.now();
    const m = JSON.parse(body) as ServedMessage;
    if ("e" in m) {
      for (const [id, mode, event, data] of m.e) {
        const e: ThreadStreamEvent = { id, mode, event, data };
        if (p.deliver) p.deliver(e);
        else p.early.push(e);
      }
    } else if ("end" in m) this.endProxied(p, false);
  }

  private endProxied(p: Proxied, tellServer: boolean): void {
    if (p.ended && !this.proxied.has(p.id)) return;
    p.ended = true;
    this.proxied.delete(p.id);
    p.end?.();
    void p.unsubscribe?.().catch(() => undefined);
    if (tellServer) this.send({ n: this.deps.node.nodeId, pe: p.id });
  }

  private serve(req: NonNullable<WatchMessage["p"]>): void {
    const { hub } = this.deps;
    const s: Served = {
      id: req.id,
      channel: channelName(this.deps.schema, "tsp", req.id),
      refreshed: Date.now(),
      batch: [],
      events: [],
      queued: false,
      stop: () => undefined,
    };
    this.served.set(req.id, s);
    // the thread's events from other nodes keep coming here while the stream is served
    this.watch(req.t).catch(() => undefined);
    s.stop = hub.threads.subscribe(req.t, req.after, {
      modes: new Set(req.modes),
      onEvent: (e) => {
        s.events.push([e.id, e.mode, e.event, e.data]);
        this.sendServed(s);
      },
      onClose: () => {
        s.batch.push({ end: true });
        this.sendServed(s);
        this.stopServing(req.id);
      },
    });
  }

  private sendServed(s: Served): void {
    if (s.queued) return;
    s.queued = true;
    setImmediate(() => {
      s.queued = false;
      if (s.events.length > 0) s.batch.unshift({ e: s.events.splice(0) });
      const bus = this.deps.node.bus;
      for (const m of s.batch.splice(0)) bus.publish(s.channel, JSON.stringify(m)).catch((err: unknown) => log.warn("served stream publish failed", { err }));
    });
  }

  private stopServing(id: string): void {
    const s = this.served.get(id);
    if (s === undefined) return;
    this.served.delete(id);
    s.stop();
    setTimeout(() => this.deps.node.bus.endStream(s.channel), 1_000).unref();
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
    if (m.p !== undefined && m.p.to === this.deps.node.nodeId) this.serve(m.p);
    if (m.pe !== undefined) this.stopServing(m.pe);
    if (m.px !== undefined) for (const id of m.px) if (this.served.has(id)) this.served.get(id)!.refreshed = Date.now();
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
    for (const p of [...this.proxied.values()]) if (now - p.lastHeard > WATCH_TTL_MS) this.endProxied(p, true); // its server is gone: the client reconnects
    for (const s of [...this.served.values()]) {
      if (now - s.refreshed > WATCH_TTL_MS)
        this.stopServing(s.id); // its reader's node is gone
      else {
        s.batch.push({ k: 1 });
        this.sendServed(s);
      }
    }
    for (const [t, nodes] of this.remote) {
      for (const [n, expires] of nodes) if (expires < now) nodes.delete(n);
      if (nodes.size === 0) this.unwatched(t);
    }
  }

  /** Tells every node which threads this one watches (none, once, after the last watch ended). */
  private announce(): void {
    if (this.local.size === 0 && this.proxied.size === 0 && !this.announcedAny) return;
    this.announcedAny = this.local.size > 0;
    const px = this.proxied.size > 0 ? { px: [...this.proxied.keys()] } : {};
    this.send({ n: this.deps.node.nodeId, w: [...this.local.keys()], full: true, ...px });
  }

  private send(m: WatchMessage): void {
    if (this.closed) return;
    this.deps.node.bus.publish(this.watchChannel, JSON.stringify(m)).catch((err: unknown) => log.warn("watch channel publish failed", { err }));
  }
}
