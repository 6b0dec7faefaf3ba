// The cluster's message bus on Postgres LISTEN/NOTIFY: run events to subscribers on other nodes,
// replies to forwarded commands, wake-ups. Per channel, each publisher's messages arrive in the
// order published (a sequence number per stream; a hole is reported, never papered over), bodies
// too large for NOTIFY travel through cluster_payloads.
/*
 * Publishing: per channel, one statement at a time (a statement's notifications are sent at its
 * commit, so commit order is publish order); messages queued meanwhile go together in the next
 * statement. Receiving: one LISTEN session per node (bus-listener.ts); per channel a chain keeps
 * arrival order while a large body is fetched.
 */
import { randomBytes } from "node:crypto";
import type { PostgresDb } from "../storage/postgres/pool.ts";
import { systemClock, type Clock } from "../util/clock.ts";
import { fitsInline, inlineEnvelope, parseEnvelope, payloadEnvelopeHead, type Envelope } from "./bus-envelope.ts";
import { BusListener } from "./bus-listener.ts";
import { nowSql, type Stamp, databaseStamp } from "./time.ts";

export interface BusMessage {
  body: string;
  /** the publishing stream (one publisher on one channel) and the message's place in it */
  stream: string;
  seq: number;
}

/** Messages that may have been missed: after a reconnect (any stream), or a hole in one stream. */
export type BusGap =
  { reason: "reconnect" } | { reason: "sequence"; stream: string; from: number; to: number } | { reason: "payload-missing"; stream: string; seq: number };

export interface BusHandler {
  message(msg: BusMessage): void;
  gap?(gap: BusGap): void;
}

export interface BusOptions {
  clock?: Clock;
  stamp?: Stamp;
  /** how long a later message waits for a missing earlier one before the hole is reported */
  reorderMs?: number;
  /** large bodies are kept this long for subscribers to fetch (default 60 s) */
  payloadRetentionMs?: number;
  /** how often this node removes expired payload rows (default 30 s; 0: never) */
  cleanupEveryMs?: number;
  minBackoffMs?: number;
  maxBackoffMs?: number;
  onError?(err: unknown): void;
}

interface Outgoing {
  body: string;
  resolve(): void;
  reject(err: unknown): void;
}

interface PublishState {
  stream: string;
  seq: number;
  queue: Outgoing[];
  sending: boolean;
}

interface StreamOrder {
  expected: number;
  held: Map<number, string | undefined>;
  cancelWait: (() => void) | undefined;
}

interface ChannelSubs {
  handlers: Set<BusHandler>;
  streams: Map<string, StreamOrder>;
  /** arrivals are handled one after another (a large body is fetched in between) */
  chain: Promise<void>;
}

export class NotifyBus {
  private readonly busId = randomBytes(5).toString("hex");
  private generation = 0;
  private readonly publishing = new Map<string, PublishState>();
  private readonly subs = new Map<string, ChannelSubs>();
  private readonly listener: BusListener;
  private readonly clock: Clock;
  private readonly stamp: Stamp;
  private cancelCleanup: (() => void) | undefined;
  private closed = false;

  constructor(
    private readonly db: PostgresDb,
    private readonly opts: BusOptions = {},
  ) {
    this.clock = opts.clock ?? systemClock;
    this.stamp = opts.stamp ?? databaseStamp;
    this.listener = new BusListener(db, {
      clock: this.clock,
      minBackoffMs: opts.minBackoffMs,
      maxBackoffMs: opts.maxBackoffMs,
      onNotification: (channel, payload) => this.arrived(channel, payload),
      onResubscribed: (channels) => {
        for (const c of channels) for (const h of this.subs.get(c)?.handlers ?? []) this.tell(() => h.gap?.({ reason: "reconnect" }));
      },
      onError: opts.onError,
    });
  }

  /** Opens the LISTEN session (and the payload cleanup timer). */
  async start(): Promise<void> {
    await this.listener.start();
    const every = this.opts.cleanupEveryMs ?? 30_000;
    if (every > 0) this.scheduleCleanup(every);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.cancelCleanup?.();
    for (const subs of this.subs.values()) for (const s of subs.streams.values()) s.cancelWait?.();
    await this.listener.close();
  }

  /** Publishes `body` on `channel`; resolves once committed (delivered to every session listening then). */
  publish(channel: string, body: string): Promise<void> {
    let state = this.publishing.get(channel);
    if (state === undefined) {
      state = { stream: `${this.busId}${(this.generation++).toString(36)}`, seq: 0, queue: [], sending: false };
      this.publishing.set(channel, state);
    }
    const out = new Promise<void>((resolve, reject) => state.queue.push({ body, resolve, reject }));
    if (!state.sending) void this.flush(state, channel);
    return out;
  }

  /** Drops the channel's publishing state (its last message was published): a later publish starts a new stream. */
  endStream(channel: string): void {
    const state = this.publishing.get(channel);
    if (state !== undefined && !state.sending && state.queue.length === 0) this.publishing.delete(channel);
  }

  /** Subscribes; resolves once listening, so everything published afterwards reaches `handler`. Returns the unsubscribe. */
  async subscribe(channel: string, handler: BusHandler): Promise<() => Promise<void>> {
    let subs = this.subs.get(channel);
    if (subs === undefined) {
      subs = { handlers: new Set(), streams: new Map(), chain: Promise.resolve() };
      this.subs.set(channel, subs);
    }
    subs.handlers.add(handler);
    await this.listener.listen(channel);
    return async () => {
      const current = this.subs.get(channel);
      if (current === undefined || !current.handlers.delete(handler) || current.handlers.size > 0) return;
      this.subs.delete(channel);
      for (const s of current.streams.values()) s.cancelWait?.();
      await this.listener.unlisten(channel);
    };
  }

  /** The LISTEN session's backend pid (tests: terminate it to exercise the reconnect). */
  listenerPid(): Promise<number> {
    return this.listener.backendPid();
  }

  /** Removes payload rows older than the retention; returns how many. */
  async cleanupPayloads(): Promise<number> {
    const result = await this.db.pool.query(`DELETE FROM cluster_payloads WHERE created_at < ${nowSql("$1")} - $2::float8 * interval '1 millisecond'`, [
      this.stamp(),
      this.opts.payloadRetentionMs ?? 60_000,
    ]);
    return result.rowCount ?? 0;
  }

  // ---- publishing --------------------------------------------------------------------------

  private async flush(state: PublishState, channel: string): Promise<void> {
    state.sending = true;
    while (state.queue.length > 0) {
      // the inline messages at the head of the queue go in one statement, a large one alone
      const batch: Outgoing[] = [];
      while (state.queue.length > 0 && fitsInline(state.queue[0].body)) batch.push(state.queue.shift()!);
      const large = batch.length === 0 ? state.queue.shift() : undefined;
      const sent = large === undefined ? batch : [large];
      try {
        if (large === undefined) {
          const envelopes = batch.map((m) => inlineEnvelope(state.stream, ++state.seq, m.body));
          await this.db.pool.query("SELECT pg_notify($1, e) FROM unnest($2::text[]) e", [channel, envelopes]);
        } else {
          await this.db.pool.query(
            `
WITH p AS (INSERT INTO cluster_payloads (channel, body) VALUES ($1, $2) RETURNING id)
SELECT pg_notify($1, $3 || p.id) FROM p`,
            [channel, large.body, payloadEnvelopeHead(state.stream, ++state.seq)],
          );
        }
        for (const m of sent) m.resolve();
      } catch (err) {
        // their sequence numbers are spent: receivers report the hole
        for (const m of sent) m.reject(err);
      }
    }
    state.sending = false;
  }

  // ---- receiving ---------------------------------------------------------------------------

  private arrived(channel: string, payload: string): void {
    const subs = this.subs.get(channel);
    if (subs === undefined) return;
    const envelope = parseEnvelope(payload);
    if (envelope === undefined) {
      this.opts.onError?.(new Error(`bus: malformed notification on ${channel}`));
      return;
    }
    subs.chain = subs.chain
      .then(async () => {
        const body = "inline" in envelope ? envelope.inline : await this.fetchPayload(envelope);
        this.order(subs, envelope, body);
      })
      .catch((err: unknown) => this.opts.onError?.(err));
  }

  private async fetchPayload(envelope: Extract<Envelope, { payloadId: string }>): Promise<string | undefined> {
    const result = await this.db.pool.query<{ body: string }>("SELECT body FROM cluster_payloads WHERE id = $1", [envelope.payloadId]);
    return result.rows[0]?.body;
  }

  /** Delivers in sequence order per stream; `body` undefined: its payload row was gone. */
  private order(subs: ChannelSubs, envelope: Envelope, body: string | undefined): void {
    let stream = subs.streams.get(envelope.stream);
    if (stream === undefined) {
      // first message of a stream seen here: it starts our view of it
      stream = { expected: envelope.seq, held: new Map(), cancelWait: undefined };
      subs.streams.set(envelope.stream, stream);
    }
    if (envelope.seq < stream.expected || stream.held.has(envelope.seq)) return; // a duplicate
    stream.held.set(envelope.seq, body);
    this.drain(subs, envelope.stream, stream);
    if (stream.held.size > 0 && stream.cancelWait === undefined) {
      const s = stream;
      s.cancelWait = this.clock.at(this.clock.now() + (this.opts.reorderMs ?? 2_000), () => {
        s.cancelWait = undefined;
        if (s.held.size === 0) return;
        const next = Math.min(...s.held.keys());
        for (const h of subs.handlers) this.tell(() => h.gap?.({ reason: "sequence", stream: envelope.stream, from: s.expected, to: next - 1 }));
        s.expected = next;
        this.drain(subs, envelope.stream, s);
      });
    }
  }

  private drain(subs: ChannelSubs, streamId: string, stream: StreamOrder): void {
    while (stream.held.has(stream.expected)) {
      const seq = stream.expected;
      const body = stream.held.get(seq);
      stream.held.delete(seq);
      stream.expected++;
      for (const h of subs.handlers) {
        this.tell(() => (body === undefined ? h.gap?.({ reason: "payload-missing", stream: streamId, seq }) : h.message({ body, stream: streamId, seq })));
      }
    }
    if (stream.held.size === 0 && stream.cancelWait !== undefined) {
      stream.cancelWait();
      stream.cancelWait = undefined;
    }
  }

  /** A handler that throws must not stop delivery to the others. */
  private tell(call: () => void): void {
    try {
      call();
    } catch (err) {
      this.opts.onError?.(err);
    }
  }

  private scheduleCleanup(every: number): void {
    if (this.closed) return;
    this.cancelCleanup = this.clock.at(this.clock.now() + every, () => {
      this.cleanupPayloads()
        .catch((err: unknown) => this.opts.onError?.(err))
        .finally(() => this.scheduleCleanup(every));
    });
  }
}
