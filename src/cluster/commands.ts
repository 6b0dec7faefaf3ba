// Requests forwarded to the node that owns a thread. The command is a row (cluster_commands), so
// it survives the owner's LISTEN session dropping: the bus only rings the owner's doorbell, and the
// owner claims its rows (by deleting them) after each ring, at start and after each reconnect.
// The reply comes back over the bus. A sender that hears nothing can withdraw its row: if the
// withdrawal deletes it, the command never ran and is safe to send again (to the new owner).
import type { PostgresDb } from "../storage/postgres/pool.ts";
import { serializeError, type SerializedError } from "../errors.ts";
import { channelName } from "./bus-envelope.ts";
import type { NotifyBus } from "./bus.ts";

export interface CommandHandler {
  /** runs a command forwarded to this node (e.g. hands it to the thread's actor); its answer is the reply */
  (body: string, from: string): Promise<string>;
}

export type ForwardResult =
  | { status: "replied"; body: string }
  | { status: "failed"; error: SerializedError }
  /** the owner never took it (withdrawn): send it again, e.g. to the thread's new owner */
  | { status: "not-taken" }
  /** the owner took it and did not answer in time: its outcome is unknown */
  | { status: "no-reply" };

export interface CommandsOptions {
  nodeId: string;
  handle: CommandHandler;
  onError?(err: unknown): void;
}

export interface SentCommand {
  id: string;
  /** the owner's answer, or after `timeoutMs` a withdrawal (not-taken) or no-reply */
  reply(timeoutMs: number): Promise<ForwardResult>;
}

interface Waiter {
  resolve(result: ForwardResult): void;
}

/** Rows claimed per statement. */
const CLAIM_BATCH = 64;

export class ClusterCommands {
  private readonly waiters = new Map<string, Waiter>();
  private readonly unsubscribes: (() => Promise<void>)[] = [];
  private claiming = false;
  private claimAgain = false;
  private closed = false;

  constructor(
    private readonly db: PostgresDb,
    private readonly bus: NotifyBus,
    private readonly opts: CommandsOptions,
  ) {}

  /** Listens for commands and replies, then takes any commands left waiting for this node. */
  async start(): Promise<void> {
    this.unsubscribes.push(
      await this.bus.subscribe(this.doorbell(this.opts.nodeId), {
        message: () => this.claim(),
        gap: () => this.claim(), // rings may have been missed: look anyway
      }),
    );
    this.unsubscribes.push(
      await this.bus.subscribe(this.replies(this.opts.nodeId), {
        message: (m) => this.replied(m.body),
        // a reply lost here leaves its sender to time out and report "no-reply"
      }),
    );
    this.claim();
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.unsubscribes.splice(0).map((u) => u()));
    for (const w of this.waiters.values()) w.resolve({ status: "no-reply" });
    this.waiters.clear();
  }

  /** Sends `body` to `targetNode` and waits up to `timeoutMs` for its reply. */
  async forward(targetNode: string, body: string, timeoutMs: number): Promise<ForwardResult> {
    return (await this.send(targetNode, body)).reply(timeoutMs);
  }

  /**
   * Queues `body` for `targetNode`: resolves once the command is committed (a command sent after
   * that runs after this one) and the owner's doorbell rung; `reply` then waits for the answer.
   */
  async send(targetNode: string, body: string): Promise<SentCommand> {
    const inserted = await this.db.pool.query<{ id: string }>(
      "INSERT INTO cluster_commands (target_node, sender_node, body) VALUES ($1, $2, $3) RETURNING id",
      [targetNode, this.opts.nodeId, body],
    );
    const id = inserted.rows[0].id;
    const answer = new Promise<ForwardResult>((resolve) => this.waiters.set(id, { resolve }));
    try {
      await this.bus.publish(this.doorbell(targetNode), id);
    } catch (err) {
      // the row waits for the owner's next look; the caller still gets its reply or a withdrawal
      this.opts.onError?.(err);
    }
    return { id, reply: (timeoutMs) => this.awaitReply(id, answer, timeoutMs) };
  }

  private async awaitReply(id: string, answer: Promise<ForwardResult>, timeoutMs: number): Promise<ForwardResult> {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), timeoutMs);
    });
    try {
      const first = await Promise.race([answer, timedOut]);
      if (first !== "timeout") return first;
      const withdrawn = await this.db.pool.query("DELETE FROM cluster_commands WHERE id = $1", [id]);
      return withdrawn.rowCount === 1 ? { status: "not-taken" } : { status: "no-reply" };
    } finally {
      clearTimeout(timer);
      this.waiters.delete(id);
    }
  }

  private doorbell(nodeId: string): string {
    return channelName(this.db.schema, "cmd", nodeId);
  }

  private replies(nodeId: string): string {
    return channelName(this.db.schema, "reply", nodeId);
  }

  /** Takes this node's waiting commands, oldest first, and runs them; rings during a claim trigger another. */
  private claim(): void {
    if (this.closed) return;
    if (this.claiming) {
      this.claimAgain = true;
      return;
    }
    this.claiming = true;
    void (async () => {
      try {
        for (;;) {
          this.claimAgain = false;
          const taken = await this.db.pool.query<{ id: string; sender_node: string; body: string }>(
            `
DELETE FROM cluster_commands WHERE id IN (
  SELECT id FROM cluster_commands WHERE target_node = $1 ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED
) RETURNING id, sender_node, body`,
            [this.opts.nodeId, CLAIM_BATCH],
          );
          // handed over in id order (the handler's own queue, e.g. an actor's mailbox, keeps it)
          for (const row of taken.rows.sort((a, b) => Number(a.id) - Number(b.id))) this.run(row.id, row.sender_node, row.body);
          if (taken.rows.length < CLAIM_BATCH && !this.claimAgain) break;
        }
      } catch (err) {
        this.opts.onError?.(err);
      } finally {
        this.claiming = false;
      }
    })();
  }

  private run(id: string, sender: string, body: string): void {
    let handled: Promise<string>;
    try {
      handled = this.opts.handle(body, sender);
    } catch (err) {
      handled = Promise.reject(err);
    }
    handled
      .then(
        (reply) => `${id} r${reply}`,
        (err: unknown) => `${id} e${JSON.stringify(serializeError(err))}`,
      )
      .then((message) => this.bus.publish(this.replies(sender), message))
      .catch((err: unknown) => this.opts.onError?.(err));
  }

  private replied(message: string): void {
    const space = message.indexOf(" ");
    const waiter = this.waiters.get(message.slice(0, space));
    if (space < 0 || waiter === undefined) return; // answered after its sender gave up
    const rest = message.slice(space + 2);
    if (message[space + 1] === "r") waiter.resolve({ status: "replied", body: rest });
    else waiter.resolve({ status: "failed", error: JSON.parse(rest) as SerializedError });
  }
}
