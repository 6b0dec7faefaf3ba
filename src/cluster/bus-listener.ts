// The bus's LISTEN session: one dedicated connection per node, holding every channel someone on
// this node subscribed to. When it drops, it is reopened (with backoff) and every channel is
// listened to again; listeners are told, since notifications sent meanwhile are lost.
import type pg from "pg";
import type { PostgresDb } from "../storage/postgres/pool.ts";
import { systemClock, type Clock } from "../util/clock.ts";
import { dedicatedClient, quoteIdent } from "./connection.ts";

export interface ListenerOptions {
  clock?: Clock;
  /** first reconnect delay, doubled up to maxBackoffMs */
  minBackoffMs?: number;
  maxBackoffMs?: number;
  onNotification(channel: string, payload: string): void;
  /** the session was reopened and the channels listened to again (messages in between are lost) */
  onResubscribed(channels: readonly string[]): void;
  onError?(err: unknown): void;
}

export class BusListener {
  private readonly channels = new Set<string>();
  private readonly clock: Clock;
  private client: pg.Client | undefined;
  private closed = false;
  private backoffMs: number;
  private everConnected = false;
  /** resolved once a session is open with every channel listened to */
  private ready!: Promise<void>;
  private markReady!: () => void;
  /** LISTEN/UNLISTEN run one at a time on the session */
  private ops: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly db: PostgresDb,
    private readonly opts: ListenerOptions,
  ) {
    this.clock = opts.clock ?? systemClock;
    this.backoffMs = opts.minBackoffMs ?? 100;
    this.resetReady();
  }

  /** Opens the session; resolves once it is open (retrying until then). */
  start(): Promise<void> {
    void this.connect();
    return this.ready;
  }

  /** Resolves once the channel is listened to on a live session: notifications sent after that arrive. */
  async listen(channel: string): Promise<void> {
    if (this.channels.has(channel)) return this.ready;
    this.channels.add(channel);
    await this.onSession(`LISTEN ${quoteIdent(channel)}`, () => this.channels.has(channel));
  }

  async unlisten(channel: string): Promise<void> {
    if (!this.channels.delete(channel)) return;
    await this.onSession(`UNLISTEN ${quoteIdent(channel)}`, () => !this.channels.has(channel));
  }

  /** The backend pid of the current session (tests, diagnostics). */
  async backendPid(): Promise<number> {
    await this.ready;
    const client = this.client;
    if (client === undefined) throw new Error("bus listener: no session");
    const result = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
    return result.rows[0].pid;
  }

  async close(): Promise<void> {
    this.closed = true;
    const client = this.client;
    this.client = undefined;
    this.markReady(); // nobody waits for a session that will not come
    await client?.end().catch(() => undefined);
  }

  /** Runs `sql` on the live session; across a reconnect the resubscription did it (while `still`). */
  private async onSession(sql: string, still: () => boolean): Promise<void> {
    for (;;) {
      await this.ready;
      if (this.closed || !still()) return;
      const client = this.client;
      if (client === undefined) continue;
      const op = this.ops.then(() => client.query(sql));
      this.ops = op.catch(() => undefined);
      try {
        await op;
        return;
      } catch (err) {
        if (this.client === client) throw err; // the session is fine: the statement failed
        // the session dropped: the reconnect listens to every channel again
      }
    }
  }

  private resetReady(): void {
    this.ready = new Promise((resolve) => {
      this.markReady = resolve;
    });
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const client = dedicatedClient(this.db, { name: "troupe-bus" });
    client.on("notification", (n) => {
      if (this.client === client && n.payload !== undefined) this.opts.onNotification(n.channel, n.payload);
    });
    const lost = (err?: unknown) => {
      if (this.client !== client) return;
      if (err !== undefined) this.opts.onError?.(err);
      this.client = undefined;
      this.resetReady();
      client.end().catch(() => undefined);
      this.retry();
    };
    client.on("error", lost);
    client.on("end", () => lost());
    try {
      await client.connect();
      const channels = [...this.channels];
      if (channels.length > 0) await client.query(channels.map((c) => `LISTEN ${quoteIdent(c)};`).join(" "));
    } catch (err) {
      this.opts.onError?.(err);
      await client.end().catch(() => undefined);
      this.retry();
      return;
    }
    if (this.closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.backoffMs = this.opts.minBackoffMs ?? 100;
    const again = this.everConnected;
    this.everConnected = true;
    this.markReady();
    if (again) this.opts.onResubscribed([...this.channels]);
  }

  private retry(): void {
    if (this.closed) return;
    const delay = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, this.opts.maxBackoffMs ?? 5_000);
    this.clock.at(this.clock.now() + delay, () => void this.connect());
  }
}
