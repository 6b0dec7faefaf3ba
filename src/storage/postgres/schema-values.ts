// Migration 7: a thread's values (threads.values_json, its latest state as JSON text) are stored
// out of line without compression (STORAGE EXTERNAL), as LMDB's thread_values keeps the bytes.
/*
 * Why: a run's finish rewrites the thread's whole values (runs.ts FINISH), and PostgreSQL's
 * default for a bytea over ~2 KB is to pglz-compress it first. On a long thread that compression
 * was most of the finish's cost, in PostgreSQL's CPU on the cores the runs need: a 41 KB value
 * (~200 echo messages) 1.4 ms compressed against 0.5 ms stored as is, 207 KB 5.0 ms against
 * 1.9 ms, 414 KB (a 1,000-run echo thread) 10.6 ms against 5.6 ms (EXPLAIN ANALYZE of the
 * update, PostgreSQL 18, this machine). The cost is disk: JSON compresses ~4.5×, and only each
 * thread's latest values are kept (the history is in the checkpoints, stored in shared chunks).
 * Values written before this migration stay compressed until their thread's next write; reads
 * are the same either way. lz4 (fast, PostgreSQL 14+) is no option: not every build has it
 * (the embedded test server's has not).
 */
import type { Migration } from "./schema.ts";

export const THREAD_VALUES_UNCOMPRESSED: Omit<Migration, "version"> = {
  name: "thread values uncompressed",
  sql: "ALTER TABLE threads ALTER COLUMN values_json SET STORAGE EXTERNAL;",
};
