// The checkpoint writes the Postgres savers of one storage have issued on the thread write chains
// and not yet seen settle, per thread, and the failures of those writes not yet reported.
/*
 * put/putWrites resolve once their statement is on the thread's chain, as the LMDB saver's resolve
 * once queued: LangGraph chains each put behind the previous one and awaits every checkpoint write
 * of a run, so resolving on commit made each of a run's puts a round trip of its own. The chain
 * keeps the order (a run's checkpoints commit before the actor's final run record, issued after
 * them) and lets them leave together (one transaction). Reads of the thread's checkpoints first
 * wait for its issued writes (read-your-writes); a write that failed is reported, once, by the next
 * read of or write to that thread (or flush()), as on LMDB.
 * Shared by every saver on the storage (one per graph library copy): a WeakMap by the chains.
 */
import { TroupeError } from "../../errors.ts";
import type { ThreadWriteChains } from "./write-chains.ts";

const perChains = new WeakMap<ThreadWriteChains, IssuedCheckpointWrites>();
/** Refused executions remembered (a graph writing after its run ended does so within moments). */
const MAX_REFUSED = 1_000;

export class IssuedCheckpointWrites {
  /** per thread: settles once its last issued checkpoint write (and so every earlier one: chain order) settled */
  private readonly last = new Map<string, Promise<void>>();
  /** per thread: the first issued write that failed since the last report */
  private readonly failed = new Map<string, Error>();
  /** executions whose writes fail (refuseExecution), oldest first */
  private readonly refused = new Set<string>();

  /** from now on, the writes of `execution` fail (ThreadCheckpointOps.refuseExecution) */
  refuseExecution(execution: string): void {
    this.refused.add(execution);
    if (this.refused.size > MAX_REFUSED) this.refused.delete(this.refused.values().next().value!);
  }

  /** a write of a refused execution: fails before anything is issued */
  throwIfRefused(execution: string | undefined): void {
    if (execution !== undefined && this.refused.has(execution)) {
      throw new TroupeError("UNAVAILABLE", `checkpoint write of a run execution refused (its create failed or it was rolled back: ${execution})`);
    }
  }

  static of(chains: ThreadWriteChains): IssuedCheckpointWrites {
    let issued = perChains.get(chains);
    if (issued === undefined) perChains.set(chains, (issued = new IssuedCheckpointWrites()));
    return issued;
  }

  /** `write`: a checkpoint write issued on the thread's chain, whose caller does not wait for it */
  add(threadId: string, write: Promise<unknown>): void {
    const settled = write.then(
      () => undefined,
      (err: unknown) => {
        if (!this.failed.has(threadId)) this.failed.set(threadId, err instanceof Error ? err : new Error(String(err)));
      },
    );
    this.last.set(threadId, settled);
    void settled.then(() => {
      if (this.last.get(threadId) === settled) this.last.delete(threadId);
    });
  }

  /** whether the thread has issued writes not yet settled */
  inFlight(threadId: string): boolean {
    return this.last.has(threadId);
  }

  /** throws (once) the failure of an issued write of the thread */
  throwFailed(threadId: string): void {
    const failed = this.failed.get(threadId);
    if (failed === undefined) return;
    this.failed.delete(threadId);
    // our own errors keep their code (a write the lease refused stays UNAVAILABLE: retried elsewhere)
    if (failed instanceof TroupeError) throw failed;
    throw new TroupeError("INTERNAL", `an earlier checkpoint write of thread ${threadId} failed: ${failed.message}`);
  }

  /** resolves once the thread's issued writes settled; rejects (once) when one of them failed */
  async settled(threadId: string): Promise<void> {
    const last = this.last.get(threadId);
    if (last !== undefined) await last;
    this.throwFailed(threadId);
  }

  /** the thread is gone: a failure of its writes has no one left to report to */
  forget(threadId: string): void {
    this.failed.delete(threadId);
  }

  /** every thread's issued writes settled; rejects (once) with a failure of any of them */
  async settledAll(): Promise<void> {
    await Promise.all(this.last.values());
    const [first] = this.failed.keys();
    if (first !== undefined) this.throwFailed(first);
  }
}
