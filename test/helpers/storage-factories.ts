// The storage port's adapters as the conformance suite (test/storage-port/) opens them: each
// factory gives a fresh, empty storage and a way to drop it. The same test cases run against every
// factory in STORAGE_FACTORIES (describe.each), so both adapters are held to one contract.
//
// The LMDB adapter wires the families call sites use so far (WiredStoragePort: run writes and
// checkpoints are still the actors' own LMDB code), so cases that need the whole port run on the
// factories that have it (`whole`).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { openStorage } from "../../src/storage/env.ts";
import { putThread } from "../../src/storage/indexes/threads.ts";
import { lmdbStoragePort } from "../../src/storage/lmdb/adapter.ts";
import type { StoragePort, WiredStoragePort } from "../../src/storage/port.ts";
import { openPostgresStorage } from "../../src/storage/postgres/adapter.ts";
import type { RunRecord, ThreadRecord } from "../../src/storage/records.ts";
import { createTestDatabase } from "./postgres.ts";

export interface StorageUnderTest {
  readonly port: WiredStoragePort;
  /** the whole port, where the adapter has it */
  readonly whole?: StoragePort;
  /** a run as its thread's actor writes it at create, with the thread's record */
  seedRun(run: RunRecord, thread: ThreadRecord): Promise<void>;
  /** closes the storage and removes its data */
  dispose(): Promise<void>;
}

export interface StorageFactory {
  readonly name: string;
  /** whether open() gives the whole port */
  readonly whole: boolean;
  open(): Promise<StorageUnderTest>;
}

export const postgresFactory: StorageFactory = {
  name: "postgres",
  whole: true,
  async open() {
    const db = await createTestDatabase();
    const port = await openPostgresStorage({ uri: db.uri, schema: "troupe", maxConnections: 8 });
    return {
      port,
      whole: port,
      seedRun: (run, thread) => port.runs.create(run, thread).committed,
      async dispose() {
        await port.close();
        await db.drop();
      },
    };
  },
};

export const lmdbFactory: StorageFactory = {
  name: "lmdb",
  whole: false,
  async open() {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "troupe-port-"));
    const env = openStorage(dir);
    return {
      port: lmdbStoragePort(env),
      async seedRun(run, thread) {
        await env.root.transaction(() => {
          putThread(env, thread, env.threads.get(thread.thread_id));
          env.runs.put([run.thread_id, run.run_id], run);
          env.runThread.put(run.run_id, run.thread_id);
          if (run.status === "pending" || run.status === "running") env.activeRuns.put([run.thread_id, run.run_id], 1);
        });
      },
      async dispose() {
        await env.close();
        fs.rmSync(dir, { recursive: true, force: true });
      },
    };
  },
};

export const STORAGE_FACTORIES: readonly StorageFactory[] = [lmdbFactory, postgresFactory];
