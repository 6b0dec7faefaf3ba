// Thread time-to-live (config `checkpointer.ttl`, and `ttl` on thread create/update): a thread not
// updated for its TTL (minutes since `updated_at`, which runs and state updates move) is deleted
// — or, for the config's default TTL with strategy `keep_latest`, pruned to its latest
// checkpoint. Runs on the HTTP thread every `sweep_interval_minutes`, at most `sweep_limit`
// threads per sweep; busy threads wait for a later sweep. Deletion and pruning go through the
// threads' actors like the API's own.
import type { ShardPool } from "../hub/shard-pool.ts";
import type { StoragePort } from "../storage/port.ts";
import { componentLog } from "../log/logger.ts";

export interface ThreadTtlOptions {
  /** TTL of threads without their own; null: only threads given a `ttl` expire */
  defaultTtlMinutes: number | null;
  /** what the default TTL does; a thread's own `ttl` always deletes (the SDK's only strategy) */
  strategy: "delete" | "keep_latest";
  sweepIntervalMinutes: number;
  sweepLimit: number;
}

const CHUNK = 256;

export class ThreadTtlSweeper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  /** keep_latest: threads pruned at this updated_at (pruning again changes nothing) */
  private readonly prunedAt = new Map<string, string>();

  constructor(
    private readonly storage: Pick<StoragePort, "threads" | "refreshReads">,
    private readonly pool: Pick<ShardPool, "deleteThread" | "request">,
    private readonly opts: ThreadTtlOptions,
    private readonly now: () => number = Date.now,
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      this.running ??= this.sweep()
        .catch((err: unknown) => componentLog("ttl").error("thread TTL sweep failed", { err }))
        .finally(() => (this.running = undefined));
    }, this.opts.sweepIntervalMinutes * 60_000);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** One sweep: returns how many threads it deleted and pruned. */
  async sweep(): Promise<{ deleted: number; pruned: number }> {
    const done = { deleted: 0, pruned: 0 };
    const everyThread = this.opts.defaultTtlMinutes !== null;
    const visited = new Set<string>();
    try {
      return await this.sweepFrom(done, everyThread, visited);
    } finally {
      // keep_latest marks only for threads still there (a full pass visits every thread)
      if (everyThread) {
        for (const id of [...this.prunedAt.keys()]) if (!visited.has(id) && (await this.storage.threads.get(id)) === undefined) this.prunedAt.delete(id);
      }
    }
  }

  private async sweepFrom(done: { deleted: number; pruned: number }, everyThread: boolean, visited: Set<string>): Promise<{ deleted: number; pruned: number }> {
    let after: string | undefined;
    for (;;) {
      this.storage.refreshReads();
      const ids = await this.storage.threads.sweepCandidates({ all: everyThread, after, limit: CHUNK });
      for (const threadId of ids) {
        if (done.deleted + done.pruned >= this.opts.sweepLimit) return done;
        visited.add(threadId);
        const due = await this.due(threadId);
        const action = due?.action;
        if (due?.action === "delete") {
          // done only if the thread is still idle and unchanged: a run started since this read keeps it
          const deleted = await this.pool.deleteThread(threadId, { updatedAt: due.updatedAt }).catch(() => false);
          if (deleted) {
            this.prunedAt.delete(threadId);
            done.deleted++;
          }
        } else if (action === "prune") {
          const t = await this.storage.threads.get(threadId);
          await this.pool.request({ type: "thread.prune_history", threadId }).catch(() => undefined);
          if (t) this.prunedAt.set(threadId, t.updated_at);
          done.pruned++;
        }
      }
      if (ids.length < CHUNK) return done;
      after = ids[ids.length - 1];
      await new Promise((r) => setImmediate(r)); // let requests in between chunks
    }
  }

  private async due(threadId: string): Promise<{ action: "delete" | "prune"; updatedAt: string } | undefined> {
    const thread = await this.storage.threads.get(threadId);
    const own = await this.storage.threads.ttl(threadId);
    if (thread === undefined) {
      this.prunedAt.delete(threadId);
      if (own !== undefined) void this.storage.threads.setTtl(threadId, null); // left by a crash between deletes
      return undefined;
    }
    const minutes = own ?? this.opts.defaultTtlMinutes;
    if (minutes === null || thread.status === "busy") return undefined;
    if (Date.parse(thread.updated_at) + minutes * 60_000 > this.now()) return undefined;
    if (own !== undefined || this.opts.strategy === "delete") return { action: "delete", updatedAt: thread.updated_at };
    return this.prunedAt.get(threadId) === thread.updated_at ? undefined : { action: "prune", updatedAt: thread.updated_at };
  }
}
