// The storage port's adapters as the conformance suite (test/storage-port/) opens them: each
// factory gives a fresh, empty storage and a way to drop it. The same test cases run against every
// factory in STORAGE_FACTORIES (describe.each), so both adapters are held to one contract.
//
// Both adapters implement the whole port; `whole` stays for an adapter that wires only part of it.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { openStorage } from "../../src/storage/env.ts";
import { lmdbStoragePort } from "../../src/storage/lmdb/adapter.ts";
import type { StoragePort } from "../../src/storage/port.ts";
import { openPostgresStorage } from "../../src/storage/postgres/adapter.ts";
import type { RunRecord, ThreadRecord } from "../../src/storage/records.ts";
import { createTestDatabase } from "./postgres.ts";

export interface StorageUnderTest {
  readonly port: StoragePort;
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

/** a run as the actor leaves it: created (pending), and finished when its status is final */
async function seedRun(port: StoragePort, run: RunRecord, thread: ThreadRecord): Promise<void> {
  const prev = await port.threads.get(thread.thread_id);
  const active = run.status === "pending" || run.status === "running";
  await port.runs.create({ run: active ? run : { ...run, status: "pending" }, thread, prev }).committed;
  if (!active) await port.runs.finish({ run, thread, prev: thread, valuesJson: undefined }).committed;
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
      seedRun: (run, thread) => seedRun(port, run, thread),
      async dispose() {
        await port.close();
        await db.drop();
      },
    };
  },
};

export const lmdbFactory: StorageFactory = {
  name: "lmdb",
  whole: true,
  async open() {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "troupe-port-"));
    const env = openStorage(dir);
    const port = lmdbStoragePort(env);
    return {
      port,
      whole: port,
      seedRun: (run, thread) => seedRun(port, run, thread),
      async dispose() {
        await env.close();
        fs.rmSync(dir, { recursive: true, force: true });
      },
    };
  },
};

export const STORAGE_FACTORIES: readonly StorageFactory[] = [lmdbFactory, postgresFactory];
