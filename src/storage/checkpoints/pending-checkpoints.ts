// What the checkpointer knows of a thread's latest root checkpoint while its write is still
// queued, so the thread's next run can read it without waiting for the commit (lmdb-saver.ts).
/*
 * Why: put/putWrites resolve once their transaction is queued, and a read of the thread waits for
 * those writes to commit (read-your-writes). The next run on a thread starts by reading its latest
 * checkpoint, so without this view every run on a busy thread waited for the previous run's commit.
 *
 * The view holds what the read would return, in the form the read would rebuild it from: the
 * serialized checkpoint body, metadata and pending writes (deserialized again on each read, as
 * from LMDB), and per channel either the serialized value, the list itself for a message list
 * (what the blob cache would hand out, by the same rules), or a pointer to a blob that is
 * already committed. It is only kept while it is certainly the thread's latest root checkpoint:
 * built from a put whose parent it knows, dropped by any other kind of write and once the thread's
 * queued writes have all committed (then LMDB is the truth again).
 */
import type { StoredChannelVersion } from "../env.ts";

/** One channel of a pending checkpoint. */
export type PendingChannel =
  /** a message list (or list of primitives): handed out as a shallow copy, as the blob cache does */
  | { version: StoredChannelVersion; list: unknown[] }
  /** the serde's bytes of the value */
  | { version: StoredChannelVersion; type: string; bytes: Uint8Array }
  /** a blob already committed under this tag (see lmdb-saver.ts) */
  | { version: StoredChannelVersion; storedTag: string }
  /** no value (the put wrote no blob for it) */
  | { version: StoredChannelVersion; absent: true };

export interface PendingWriteRecord {
  taskId: string;
  idx: number;
  channel: string;
  type: string;
  value: Uint8Array;
  taskPath: string;
}

export interface PendingCheckpoint {
  id: string;
  parentId: string | null;
  bodyType: string;
  body: Uint8Array;
  metadataType: string;
  metadata: Uint8Array;
  channels: Map<string, PendingChannel>;
  /** pending writes put on this checkpoint since it was put, by `${taskId}\u0000${idx}` */
  writes: Map<string, PendingWriteRecord>;
}

/** The key of a write in PendingCheckpoint.writes. */
export function pendingWriteKey(taskId: string, idx: number): string {
  return `${taskId}\u0000${idx}`;
}

/** Records writes on a pending checkpoint by the same rules as the writes DB (first wins for regular writes). */
export function addPendingWrites(target: PendingCheckpoint, records: PendingWriteRecord[]): void {
  for (const record of records) {
    const key = pendingWriteKey(record.taskId, record.idx);
    if (record.idx >= 0 && target.writes.has(key)) continue;
    target.writes.set(key, record);
  }
}
