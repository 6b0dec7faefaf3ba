// Whole-DB scans from the HTTP thread (an assistant's delete looking for its runs and threads):
// read a chunk at a time with an event-loop turn between chunks, so a large data dir does not
// stall every other request while it is walked.
import type { Database, Key } from "lmdb";

/** Entries read per event-loop turn. */
export const SCAN_CHUNK = 2_000;

export async function* entriesInChunks<V, K extends Key>(db: Database<V, K>, chunk = SCAN_CHUNK): AsyncGenerator<{ key: K; value: V }> {
  let after: K | undefined;
  for (;;) {
    const range = { ...(after === undefined ? {} : { start: after, exclusiveStart: true }), limit: chunk };
    let seen = 0;
    for (const entry of db.getRange(range)) {
      seen++;
      after = entry.key;
      yield entry;
    }
    if (seen < chunk) return;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}
