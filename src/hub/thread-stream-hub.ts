// HTTP-thread side of thread streams (GET /threads/{t}/stream): fans out every run's events, run
// starts/ends and state updates of a thread to its listeners, numbering them so Last-Event-ID can
// resume from a bounded per-thread buffer. Threads nobody listens to cost one map lookup.

import { EventBuffer } from "../bridge/event-buffer.ts";

export type ThreadStreamMode = "run_modes" | "lifecycle" | "state_update";
export const THREAD_STREAM_MODES: readonly ThreadStreamMode[] = ["run_modes", "lifecycle", "state_update"];

/** One event of a thread stream; data is serialized JSON text. */
export interface ThreadStreamEvent {
  /** increasing over the whole hub (so per thread too), never reused in this process */
  id: number;
  mode: ThreadStreamMode;
  event: string;
  data: string;
}

export interface ThreadStreamSubscriber {
  modes: ReadonlySet<ThreadStreamMode>;
  /** cluster: forwards this node's events of the thread to other nodes (remote-threads.ts); not fed what they sent (inject) */
  relay?: boolean;
  onEvent(e: ThreadStreamEvent): void;
  /** the thread was deleted: the stream is over */
  onClose(): void;
}

export interface ThreadStreamHubOptions {
  /** events kept per thread for Last-Event-ID resumption (oldest dropped first) */
  maxEvents: number;
  /** bytes of event data kept per thread (oldest dropped first; the newest event always stays) */
  maxBytes: number;
  /** how long a thread's buffer outlives its last listener, so a reconnect can still resume */
  retentionMs: number;
}

export const THREAD_STREAM_DEFAULTS: ThreadStreamHubOptions = { maxEvents: 1000, maxBytes: 1024 * 1024, retentionMs: 60_000 };

interface Channel {
  buffer: EventBuffer<ThreadStreamEvent>;
  subscribers: Set<ThreadStreamSubscriber>;
  expireTimer?: NodeJS.Timeout;
  /** cluster: clients (not relays) subscribed, and when the last one left */
  clients: number;
  clientsLeftAt?: number;
  /**
   * Cluster: the buffer serves clients (created by one, or one came within the retention). A
   * channel kept only by relays holds just the newest event, so a node relaying many threads for
   * other nodes does not keep a resume buffer per thread that none of its clients can use.
   */
  resumable: boolean;
  clientsGoneTimer?: NodeJS.Timeout;
}

/** What request handlers may do with thread streams (ShardPool.threadStreams); run events reach them through the run hub. */
export type ThreadStreams = Pick<ThreadStreamHub, "has" | "publish" | "subscribe">;

export class ThreadStreamHub {
  private readonly channels = new Map<string, Channel>();
  private readonly opts: ThreadStreamHubOptions;
  private seq = 0;
  /** ids are seq += idStep from the node's tag (cluster: tagIds), so a node knows its own ids */
  private idStep = 1;
  private idTag = 0;

  constructor(opts: Partial<ThreadStreamHubOptions> = {}) {
    this.opts = { ...THREAD_STREAM_DEFAULTS, ...opts };
  }

  /** Whether anyone listens to (or may resume) this thread's stream. */
  has(threadId: string): boolean {
    return this.channels.has(threadId);
  }

  /** Record and deliver an event; dropped at once when the thread has no channel. */
  publish(threadId: string, mode: ThreadStreamMode, event: string, data: string): void {
    const ch = this.channels.get(threadId);
    if (!ch) return;
    const e: ThreadStreamEvent = { id: (this.seq += this.idStep), mode, event, data };
    ch.buffer.push(e);
    for (const s of ch.subscribers) if (s.modes.has(mode)) s.onEvent(e);
  }

  /**
   * Cluster: this node's ids are `tag` modulo `step` (tag in 1..step-1), so a Last-Event-ID another
   * node gave out (a client reconnecting through a load balancer) is never read as one of its own.
   * Called before any event is published.
   */
  tagIds(tag: number, step: number): void {
    this.idStep = step;
    this.idTag = tag;
    this.seq = Math.max(this.seq - (this.seq % step), 0) + tag;
  }

  /** Whether `id` is one this node gives out (cluster: its tag), so a Last-Event-ID of it resumes here. */
  ownsId(id: number): boolean {
    return id === -1 || (id - this.idTag) % this.idStep === 0;
  }

  /**
   * Cluster: an event of the thread that another node published (remote-threads.ts), numbered and
   * delivered here like a local one, except to relays (its own node relays it to every watcher).
   */
  inject(threadId: string, mode: ThreadStreamMode, event: string, data: string): void {
    const ch = this.channels.get(threadId);
    if (!ch) return;
    const e: ThreadStreamEvent = { id: (this.seq += this.idStep), mode, event, data };
    ch.buffer.push(e);
    for (const s of ch.subscribers) if (!s.relay && s.modes.has(mode)) s.onEvent(e);
  }

  /**
   * Whether clients (not relays) listen to the thread, or one left less than the retention ago and
   * may resume: a cluster node watches other nodes' runs of the thread that long.
   */
  heldForClients(threadId: string, now: number): boolean {
    const ch = this.channels.get(threadId);
    if (ch === undefined) return false;
    return ch.clients > 0 || (ch.clientsLeftAt !== undefined && now - ch.clientsLeftAt < this.opts.retentionMs);
  }

  /**
   * Listen to a thread from now on. `after`: a Last-Event-ID; buffered events with a larger id
   * (and a wanted mode) are replayed first. Returns the unsubscribe function.
   */
  subscribe(threadId: string, after: number | undefined, sub: ThreadStreamSubscriber): () => void {
    let ch = this.channels.get(threadId);
    if (!ch) {
      const resumable = sub.relay !== true;
      ch = { buffer: new EventBuffer(resumable ? this.opts.maxBytes : 0, this.opts.maxEvents), subscribers: new Set(), clients: 0, resumable };
      this.channels.set(threadId, ch);
    }
    if (ch.expireTimer) {
      clearTimeout(ch.expireTimer);
      ch.expireTimer = undefined;
    }
    if (!sub.relay) {
      clearTimeout(ch.clientsGoneTimer);
      if (!ch.resumable) {
        ch.resumable = true; // what the relays kept is nobody's to resume
        ch.buffer.take();
        ch.buffer.bound(this.opts.maxBytes);
      }
    }
    // an id this node did not give out (another node's) resumes nothing here: live from now on
    if (after !== undefined && this.ownsId(after)) {
      for (const e of ch.buffer.events) if (e.id > after && sub.modes.has(e.mode)) sub.onEvent(e);
    }
    ch.subscribers.add(sub);
    if (!sub.relay) ch.clients++;
    const channel = ch;
    return () => {
      if (!channel.subscribers.delete(sub)) return;
      if (!sub.relay && --channel.clients === 0) {
        channel.clientsLeftAt = Date.now();
        if (channel.subscribers.size > 0) {
          // relays keep the channel: the buffer serves a returning client for the retention only
          channel.clientsGoneTimer = setTimeout(() => {
            if (channel.clients > 0) return;
            channel.resumable = false;
            channel.buffer.bound(0);
          }, this.opts.retentionMs);
          channel.clientsGoneTimer.unref();
        }
      }
      if (channel.subscribers.size > 0) return;
      if (this.channels.get(threadId) !== channel) return; // closed meanwhile
      channel.expireTimer = setTimeout(() => {
        if (channel.subscribers.size === 0 && this.channels.get(threadId) === channel) this.channels.delete(threadId);
      }, this.opts.retentionMs);
      channel.expireTimer.unref();
    };
  }

  /** The thread is gone: end every stream on it and forget its buffer. */
  close(threadId: string): void {
    const ch = this.channels.get(threadId);
    if (!ch) return;
    this.channels.delete(threadId);
    if (ch.expireTimer) clearTimeout(ch.expireTimer);
    clearTimeout(ch.clientsGoneTimer);
    const subs = [...ch.subscribers];
    ch.subscribers.clear();
    for (const s of subs) s.onClose();
  }

  /** Number of threads with a channel (listened to, or within retention): for tests and metrics. */
  get size(): number {
    return this.channels.size;
  }
}
