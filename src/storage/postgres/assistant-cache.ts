// The assistants runs are created with, as this thread last read them (AssistantsPort.forRun on
// PostgreSQL): a run create then sends no assistant read, one round trip less on its path. Never
// trusted on its own: each entry carries its row's stamp, which the run's create statement checks
// (runs.ts), so an entry another node changed or deleted meanwhile fails that create, which is
// retried from a fresh read (docs/STORAGE.md, "The assistant of a run").
import type { AssistantRecord } from "../records.ts";

/** Most assistants kept (least recently used dropped first). */
export const MAX_ENTRIES = 1_000;
/**
 * An entry is read again after this long. The stamp is the row's xmin, a 32-bit transaction id:
 * an entry older than a wraparound could in principle match a later version's; minutes are far
 * below the billions of transactions a wraparound takes.
 */
export const MAX_AGE_MS = 5 * 60_000;

interface Entry {
  record: AssistantRecord;
  stamp: string;
  readAt: number;
}

export class RunAssistantCache {
  /** insertion order = use order (an entry used is moved to the end) */
  private readonly entries = new Map<string, Entry>();
  /** assistant id → the write counter at its last write (a read started before it is not kept) */
  private readonly written = new Map<string, number>();
  private writes = 0;
  /** reads started before this (a clear) are not kept */
  private readsBefore = 0;

  constructor(private readonly now: () => number = () => performance.now()) {}

  get(assistantId: string): Entry | undefined {
    const e = this.entries.get(assistantId);
    if (e === undefined) return undefined;
    this.entries.delete(assistantId);
    if (this.now() - e.readAt > MAX_AGE_MS) return undefined;
    this.entries.set(assistantId, e);
    return e;
  }

  /** A token to pass to `keep` for a read starting now. */
  readStarts(): number {
    return this.writes;
  }

  /** Keeps what a read that started at `token` found, unless a write of this thread touched the assistant since. */
  keep(assistantId: string, found: { record: AssistantRecord; stamp: string } | undefined, token: number): void {
    if (token < this.readsBefore || (this.written.get(assistantId) ?? -1) >= token) return;
    this.entries.delete(assistantId);
    if (found === undefined) return;
    this.entries.set(assistantId, { ...found, readAt: this.now() });
    if (this.entries.size > MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value!);
  }

  /** The assistant is written (here: create, patch, latest version, delete; or by another node: its notice): its entry goes, and reads in flight are not kept. */
  forget(assistantId: string): void {
    this.entries.delete(assistantId);
    this.written.delete(assistantId); // (moved to the end: the oldest write is dropped first)
    this.written.set(assistantId, this.writes++);
    if (this.written.size > MAX_ENTRIES) this.written.delete(this.written.keys().next().value!);
  }

  /** Every entry goes (notices of other nodes' writes may have been missed), and reads in flight are not kept. */
  clear(): void {
    this.entries.clear();
    this.readsBefore = ++this.writes;
  }
}
