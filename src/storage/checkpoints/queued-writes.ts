// What the checkpointer has queued for one thread and not yet seen commit, so a put can be written
// without reading LMDB inside its transaction (see LmdbCheckpointSaver.put): the highest blob
// version queued per channel, and per namespace the newest queued record whose fork tags are known.
/*
 * Why: a transaction that reads runs as a callback on the JS thread, and lmdb-js' write thread
 * waits for that thread to be free, so every such write held the thread's commit back until the
 * run executing next yielded. A put reads for two things only: whether a blob of its version
 * already exists (a fork reusing a version), and its parent record's fork tags. Both are known
 * from LMDB's committed state plus what is queued here, which this JS thread wrote itself (a
 * thread's checkpoints are written by its actor's worker only; operations that rewrite a thread's
 * data wholesale wait for its queue to drain first, and the entry goes when it drains).
 */
import type { StoredChannelVersion } from "../env.ts";

export type TagMap = Record<string, [StoredChannelVersion, string]>;

export class QueuedThreadWrites {
  /** `${ns}\u0000${channel}` -> highest numeric version queued; NaN once a non-numeric one was */
  private readonly versions = new Map<string, number>();
  /** slot -> highest version committed when first asked (only this thread's queued writes add to it meanwhile) */
  private readonly committed = new Map<string, number>();
  /** ns -> the newest queued checkpoint of that namespace, with the fork tags its record gets */
  private readonly tips = new Map<string, { id: string; tags: TagMap | undefined }>();

  /** A blob of `version` is queued in this slot. */
  noteBlob(ns: string, channel: string, version: StoredChannelVersion): void {
    const slot = `${ns}\u0000${channel}`;
    const queued = this.versions.get(slot) ?? Number.NEGATIVE_INFINITY;
    this.versions.set(slot, typeof version === "number" ? Math.max(queued, version) : Number.NaN);
  }

  /** The highest version queued in the slot (-Infinity: none; NaN: a non-numeric one). */
  highestVersion(ns: string, channel: string): number {
    return this.versions.get(`${ns}\u0000${channel}`) ?? Number.NEGATIVE_INFINITY;
  }

  /** The slot's highest committed version, read once (`read`) while the thread has writes queued. */
  highestCommittedVersion(ns: string, channel: string, read: () => number): number {
    const slot = `${ns}\u0000${channel}`;
    let version = this.committed.get(slot);
    if (version === undefined) this.committed.set(slot, (version = read()));
    return version;
  }

  /** A checkpoint of `ns` was queued; `tags` undefined while its transaction has not decided them. */
  noteCheckpoint(ns: string, id: string, tags: TagMap | undefined): void {
    this.tips.set(ns, { id, tags });
  }

  /** Its transaction decided the tags of a queued checkpoint. */
  settleTags(ns: string, id: string, tags: TagMap): void {
    const tip = this.tips.get(ns);
    if (tip?.id === id) tip.tags = tags;
  }

  /** The fork tags of queued checkpoint `id` if it is the newest of its namespace and they are decided. */
  tagsOf(ns: string, id: string): TagMap | undefined {
    const tip = this.tips.get(ns);
    return tip?.id === id ? tip.tags : undefined;
  }
}
