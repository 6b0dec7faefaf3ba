// Scans from the HTTP thread that no index serves (an assistant's delete looking for its runs, a
// run list filtered by a finished status): read a chunk at a time with an event-loop turn between
// chunks, so a large data dir does not stall every other request while it is walked.
import type { Database, Key } from "lmdb";

/** Entries read per event-loop turn. */
export const SCAN_CHUNK = 2_000;

/** The entries of `db` (between `bounds`, if given) in key order. */
export async function* entriesInChunks<V, K extends Key>(
  db: Pick<Database<V, K>, "getRange">,
  chunk = SCAN_CHUNK,
  bounds: { start?: K; end?: K } = {},
): AsyncGenerator<{ key: K; value: V }> {
  let after: K | undefined;
  for (;;) {
    const range = { ...bounds, ...(after === undefined ? {} : { start: after, exclusiveStart: true }), limit: chunk };
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
