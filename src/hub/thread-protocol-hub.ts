// HTTP-thread side of the thread-centric protocol (docs/THREAD_PROTOCOL.md): per thread, the
// "session" of its latest protocol run — a bounded buffer of that run's events, numbered by one
// counter so every event has a unique, increasing `seq`/`event_id` — and the listeners (SSE
// streams, WebSocket subscriptions) that receive the events their filter matches. A new
// protocol run on the thread starts a new session: late connections replay only that run.
import { EventBuffer } from "../bridge/event-buffer.ts";
import type { RunEvent } from "../bridge/messages.ts";

/** What a stream or subscription asks for (the EventStreamRequest / SubscribeParams filter). */
export interface ProtocolFilter {
  channels: readonly string[];
  /** namespace prefixes; absent = every namespace */
  namespaces?: readonly (readonly string[])[];
  /** how far below a prefix events may be; absent = unbounded */
  depth?: number;
}

/** One numbered event, ready to send. */
export interface ProtocolFrame {
  seq: number;
  method: string;
  channel: string;
  namespace: string[];
  /** the whole event as JSON text, `type`/`event_id`/`seq` included */
  data: string;
  /** cluster: the node whose session numbered it, when not this one (inject) */
  origin?: string;
}

export interface ProtocolListener {
  filter: ProtocolFilter;
  /** cluster: forwards every event of this node's session to other nodes (remote-threads.ts); its filter is not consulted, injected events are not fed to it */
  relay?: boolean;
  onEvent(frame: ProtocolFrame): void;
  /** the thread was deleted */
  onClose(): void;
}

export type AgentStatus = "started" | "running" | "completed" | "failed" | "interrupted";

export interface AgentTreeNode {
  namespace: string[];
  status: AgentStatus;
  graph_name: string;
  children?: AgentTreeNode[];
}

export interface ProtocolHubOptions {
  /** bytes of event data kept per thread session (oldest dropped first, the newest always stays) */
  maxBytes: number;
  /** how long a finished session stays for late readers once nobody listens */
  retentionMs: number;
}

interface Session {
  runId?: string;
  running: boolean;
  buffer: EventBuffer<ProtocolFrame>;
  listeners: Set<ProtocolListener>;
  /** status and graph name per namespace, from lifecycle events (agent.getTree) */
  agents: Map<string, { namespace: string[]; status: AgentStatus; graph_name: string }>;
  lastSeq?: number;
  /** the run's root lifecycle reached completed/failed/interrupted */
  rootEnded: boolean;
  /**
   * The run's root `input.requested` and terminal lifecycle events, held until the run's end is
   * committed (ended()): a client acting on them at once (responding to an interrupt, starting
   * the next run) must find the thread already interrupted / idle, not still busy.
   */
  held: Pick<RunEvent, "event" | "data">[];
  expireTimer?: NodeJS.Timeout;
  /** cluster: the node whose session this one mirrors (inject) and the last seq taken from it */
  origin?: string;
  originSeq?: number;
}

const TERMINAL = /"event":"(completed|failed|interrupted)"/;
/** Whether a root lifecycle event's JSON says the run ended (its data holds no nested JSON text). */
const isTerminalLifecycle = (json: string): boolean => TERMINAL.test(json);

/** Decoded worker event name: [method, channel, namespace] (see protocol-run.ts). */
export type ProtocolEventName = [string, string, string[]];

const segmentBase = (segment: string): string => {
  const i = segment.indexOf(":");
  return i === -1 ? segment : segment.slice(0, i);
};

/** `prefix` is a prefix of `ns`; a prefix segment without ":" also matches `name:<task id>`. */
/** The session now follows `runId` (started here, or by another node): the previous run's state goes. */
function startRun(s: Session, runId: string): void {
  s.runId = runId;
  s.rootEnded = false;
  s.held = [];
  s.lastSeq = undefined;
  s.buffer.take();
  s.agents.clear();
  s.origin = undefined;
}

function isPrefixMatch(ns: readonly string[], prefix: readonly string[]): boolean {
  if (prefix.length > ns.length) return false;
  for (let i = 0; i < prefix.length; i++) {
    if (ns[i] === prefix[i]) continue;
    if (prefix[i].includes(":") || segmentBase(ns[i]) !== prefix[i]) return false;
  }
  return true;
}

/** The same matching as the SDK's client-side narrowing (matchesSubscription), so both agree. */
export function matchesFilter(filter: ProtocolFilter, channel: string, namespace: readonly string[]): boolean {
  if (!filter.channels.includes(channel) && !(channel.startsWith("custom:") && filter.channels.includes("custom"))) return false;
  if (!filter.namespaces || filter.namespaces.length === 0) return true;
  return filter.namespaces.some((p) => isPrefixMatch(namespace, p) && (filter.depth === undefined || namespace.length - p.length <= filter.depth));
}

/** What request handlers may do with thread-protocol sessions (ShardPool.sessions); runs feed them through the run hub. */
export type ThreadProtocolSessions = Pick<
  ThreadProtocolHub,
  "adopt" | "listenerCount" | "announceWhenAdopted" | "subscribe" | "sessionRun" | "announce" | "lastSeq" | "tree"
>;

export class ThreadProtocolHub {
  private readonly sessions = new Map<string, Session>();
  /** the announcement that opens a run's session, by run id (announceWhenAdopted) */
  private readonly openers = new Map<string, { method: string; channel: string; data: unknown }>();
  private readonly opts: ProtocolHubOptions;
  /**
   * One counter for every thread. It starts from the clock (µs) so ids stay increasing across
   * restarts too: a client that outlives the server dedups by event_id and must not drop new events.
   */
  private seq = Date.now() * 1000;

  constructor(opts: Partial<ProtocolHubOptions> = {}) {
    this.opts = { maxBytes: 16 * 1024 * 1024, retentionMs: 60_000, ...opts };
  }

  private session(threadId: string): Session {
    let s = this.sessions.get(threadId);
    if (!s) {
      s = { running: false, rootEnded: false, held: [], buffer: new EventBuffer(this.opts.maxBytes), listeners: new Set(), agents: new Map() };
      this.sessions.set(threadId, s);
    }
    return s;
  }

  /**
   * A protocol run was accepted (its create reply arrived) or started executing: the thread's
   * session becomes that run unless it already is, or a newer one is (run ids are UUID v7, so
   * they order by creation): a recovered or queued older run does not take a newer run's place.
   * Both calls happen because either can come first: a create reply, the run's start and its
   * first events can arrive from the worker in one batch.
   */
  adopt(threadId: string, runId: string): void {
    const s = this.session(threadId);
    if (s.runId !== undefined && s.runId >= runId) return;
    startRun(s, runId);
    s.running = true;
    // a run's seqs start past the clock (µs): in a cluster the next run may be numbered by another
    // node, whose seqs must not repeat this one's (clients dedup by event_id)
    this.seq = Math.max(this.seq, Date.now() * 1000);
    this.keepAlive(threadId, s);
    const opener = this.openers.get(runId);
    if (opener) {
      this.openers.delete(runId);
      this.announce(threadId, opener.method, opener.channel, opener.data);
    }
  }

  /**
   * An event that must open run `runId`'s session, before any of its own events (input.answered
   * before the resume run's lifecycle): delivered when the session adopts the run, which can be
   * before the run's create reply arrives. `cancel()` when the create fails.
   */
  announceWhenAdopted(runId: string, method: string, channel: string, data: unknown): { cancel(): void } {
    this.openers.set(runId, { method, channel, data });
    return { cancel: () => void this.openers.delete(runId) };
  }

  /** A protocol run started executing; a re-executed attempt of the session's run starts its stream again. */
  started(threadId: string, runId: string, attempt: number): void {
    const s = this.sessions.get(threadId);
    if (s?.runId === runId && attempt > 1) {
      s.rootEnded = false;
      s.held = [];
      s.buffer.take();
      s.agents.clear();
      this.seq = Math.max(this.seq, Date.now() * 1000); // the attempt before may have been another node's
      return;
    }
    this.adopt(threadId, runId);
  }

  /** Events of a protocol run; those of a run superseded by a newer session are dropped. */
  publish(threadId: string, runId: string, events: readonly RunEvent[]): void {
    const s = this.sessions.get(threadId);
    if (!s || s.runId !== runId) return;
    for (const e of events) this.deliver(s, e);
  }

  private deliver(s: Session, e: Pick<RunEvent, "event" | "data">): void {
    let name: ProtocolEventName;
    try {
      name = JSON.parse(e.event) as ProtocolEventName;
    } catch {
      return; // not a protocol event
    }
    if (!Array.isArray(name) || name.length !== 3) return;
    const [method, channel, namespace] = name;
    if (s.running && namespace.length === 0 && (method === "input.requested" || (method === "lifecycle" && isTerminalLifecycle(e.data)))) {
      s.held.push(e);
      return;
    }
    const seq = ++this.seq;
    const frame: ProtocolFrame = { seq, method, channel, namespace, data: `{"event_id":"${seq}","seq":${seq},${e.data.slice(1)}` };
    s.lastSeq = seq;
    if (method === "lifecycle") this.track(s, namespace, frame.data);
    s.buffer.push(frame);
    for (const l of s.listeners) if (l.relay || matchesFilter(l.filter, channel, namespace)) l.onEvent(frame);
  }

  /**
   * Cluster: the opener registered for a run this node forwards to the node executing it, which
   * announces it in its own session (so every node's copy has the same events and seqs).
   */
  takeOpener(runId: string): { method: string; channel: string; data: unknown } | undefined {
    const opener = this.openers.get(runId);
    this.openers.delete(runId);
    return opener;
  }

  /**
   * Cluster: a frame of the session of the node executing the thread's protocol run
   * (remote-threads.ts), kept with its seq: this session mirrors that node's. A newer run starts a
   * new session as adopt() does; frames of an older run, or already taken from `origin`, are dropped.
   */
  inject(threadId: string, runId: string, origin: string, frame: ProtocolFrame): void {
    const s = this.session(threadId);
    if (s.runId === undefined || s.runId < runId) {
      this.openers.delete(runId);
      startRun(s, runId);
    } else if (s.runId > runId) return;
    if (s.origin === origin && s.originSeq !== undefined && frame.seq <= s.originSeq) return;
    s.origin = origin;
    s.originSeq = frame.seq;
    s.running = true;
    s.lastSeq = frame.seq;
    if (frame.method === "lifecycle") this.track(s, frame.namespace, frame.data);
    s.buffer.push(frame);
    for (const l of s.listeners) if (!l.relay && matchesFilter(l.filter, frame.channel, frame.namespace)) l.onEvent(frame);
    if (s.rootEnded) {
      s.running = false;
      this.keepAlive(threadId, s);
    }
  }

  /**
   * Cluster: a run of the session ended on another node. Frames of its end come from that node
   * (inject); this only stops a session that never got any (nobody here watched the thread) from
   * staying `running` for ever.
   */
  settled(threadId: string, runId: string): void {
    const s = this.sessions.get(threadId);
    if (!s || s.runId !== runId || s.origin !== undefined || !s.running) return;
    s.running = false;
    this.keepAlive(threadId, s);
  }

  /** How many clients (not relays) listen to the thread's session. */
  listenerCount(threadId: string): number {
    let n = 0;
    for (const l of this.sessions.get(threadId)?.listeners ?? []) if (!l.relay) n++;
    return n;
  }

  /**
   * The session's run ended: its buffer stays for late readers while listened to, then for
   * retentionMs. A run that ended without its root lifecycle saying so (cancelled while queued,
   * failed before its graph ran) gets a `failed` one, so clients waiting for the end stop waiting.
   */
  ended(threadId: string, runId: string, status: string): void {
    const s = this.sessions.get(threadId);
    if (!s || s.runId !== runId) return;
    s.running = false;
    const held = s.held;
    s.held = [];
    for (const e of held) this.deliver(s, e);
    if (!s.rootEnded) {
      const data = { event: "failed", graph_name: s.agents.get("")?.graph_name ?? "root", error: `Run ended with status ${status}` };
      this.announce(threadId, "lifecycle", "lifecycle", data);
    }
    this.keepAlive(threadId, s);
  }

  /**
   * Listen from now on, after replaying the held events the filter matches (all of the session's
   * run, or only those with seq > `since`). Returns the unsubscribe function and how many events
   * were replayed.
   */
  subscribe(threadId: string, since: number | undefined, listener: ProtocolListener): { unsubscribe: () => void; replayed: number } {
    const s = this.session(threadId);
    if (s.expireTimer) {
      clearTimeout(s.expireTimer);
      s.expireTimer = undefined;
    }
    let replayed = 0;
    for (const f of s.buffer.events) {
      if (since !== undefined && f.seq <= since) continue;
      if (!listener.relay && !matchesFilter(listener.filter, f.channel, f.namespace)) continue;
      listener.onEvent(f);
      replayed++;
    }
    s.listeners.add(listener);
    const unsubscribe = () => {
      if (!s.listeners.delete(listener)) return;
      if (this.sessions.get(threadId) !== s || s.listeners.size > 0) return;
      // The run is over and its last reader left: the session goes (protocol: "when the run
      // completes and all connections close, the server drops ephemeral in-memory state"). A
      // client resuming an interrupt may open its stream before its input.respond arrives; it must
      // not be handed the previous run's events, which end with that run's terminal lifecycle.
      if (!s.running) this.drop(threadId, s);
    };
    return { unsubscribe, replayed };
  }

  /** The run of the thread's session, if any. */
  sessionRun(threadId: string): string | undefined {
    return this.sessions.get(threadId)?.runId;
  }

  /** An event the server itself adds to the thread's session (e.g. `input.answered`). */
  announce(threadId: string, method: string, channel: string, data: unknown): void {
    const s = this.sessions.get(threadId);
    if (!s) return;
    this.deliver(s, {
      event: JSON.stringify([method, channel, []]),
      data: JSON.stringify({ type: "event", method, params: { namespace: [], timestamp: Date.now(), data } }),
    });
  }

  /** The last seq of the thread's session, if it has one (commands' `meta.applied_through_seq`). */
  lastSeq(threadId: string): number | undefined {
    return this.sessions.get(threadId)?.lastSeq;
  }

  /** The agent tree of the thread's session run, from its lifecycle events (agent.getTree). */
  tree(threadId: string): AgentTreeNode | undefined {
    const s = this.sessions.get(threadId);
    const root = s?.agents.get("");
    if (!s || !root) return undefined;
    const nodes = new Map<string, AgentTreeNode>();
    const all = [...s.agents.entries()].sort((a, b) => a[1].namespace.length - b[1].namespace.length);
    for (const [key, a] of all) {
      const node: AgentTreeNode = { namespace: a.namespace, status: a.status, graph_name: a.graph_name };
      nodes.set(key, node);
      if (a.namespace.length === 0) continue;
      const parent = nodes.get(a.namespace.slice(0, -1).join("|")) ?? nodes.get("")!;
      (parent.children ??= []).push(node);
    }
    return nodes.get("");
  }

  /** The thread is gone: end its listeners and forget its session. */
  close(threadId: string): void {
    const s = this.sessions.get(threadId);
    if (!s) return;
    this.drop(threadId, s);
    const listeners = [...s.listeners];
    s.listeners.clear();
    for (const l of listeners) l.onClose();
  }

  /** Threads with a session: for tests and metrics. */
  get size(): number {
    return this.sessions.size;
  }

  private track(s: Session, namespace: string[], data: string): void {
    try {
      const d = (JSON.parse(data) as { params?: { data?: { event?: AgentStatus; graph_name?: string } } }).params?.data;
      if (!d?.event) return;
      if (namespace.length === 0 && (d.event === "completed" || d.event === "failed" || d.event === "interrupted")) s.rootEnded = true;
      const key = namespace.join("|");
      const prev = s.agents.get(key);
      s.agents.set(key, { namespace, status: d.event, graph_name: d.graph_name ?? prev?.graph_name ?? namespace.at(-1) ?? "root" });
    } catch {
      // a lifecycle event we cannot read does not change the tree
    }
  }

  /** A session nobody has read after its run ended is kept retentionMs for a late reader. */
  private keepAlive(threadId: string, s: Session): void {
    if (s.expireTimer) clearTimeout(s.expireTimer);
    s.expireTimer = undefined;
    if (s.listeners.size > 0 || s.running) return;
    s.expireTimer = setTimeout(() => {
      if (this.sessions.get(threadId) === s && s.listeners.size === 0 && !s.running) this.drop(threadId, s);
    }, this.opts.retentionMs);
    s.expireTimer.unref();
  }

  private drop(threadId: string, s: Session): void {
    if (s.expireTimer) clearTimeout(s.expireTimer);
    this.sessions.delete(threadId);
  }
}
