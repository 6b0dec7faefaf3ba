// The LMDB environment's record format: msgpack DBs keep shared record structures (storage/env.ts).
// Data dirs written before that (every record carrying its own keys) must still read, and the
// structures' key must never show up as a record.
import { open } from "lmdb";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { dataFilePath, openStorage } from "../../src/storage/env.ts";
import type { RunRecord } from "../../src/storage/records.ts";
import { entriesInChunks } from "../../src/storage/scan.ts";

let dir: string;

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "troupe-env-"));
});

afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

const run = (n: number): RunRecord => ({
  run_id: `run-${n}`,
  thread_id: "t",
  assistant_id: "a",
  graph_id: "echo",
  status: n % 2 === 0 ? "success" : "pending",
  metadata: { n, tags: ["a", "b"] },
  kwargs: {
    input: { messages: [{ role: "user", content: `hi ${n}` }] },
    config: { configurable: {} },
    stream_mode: ["values"],
    temporary: false,
    subgraphs: false,
    resumable: false,
  },
  multitask_strategy: "enqueue",
  created_at: "2026-11-25T00:00:00.000Z",
  updated_at: "2026-11-25T00:00:00.000Z",
  attempt: 1,
});

it("reads records written without shared structures, next to new ones, and ranges yield only records", async () => {
  // an env as written before shared structures: plain msgpack DBs
  const legacy = open({ path: dataFilePath(dir), maxDbs: 32, compression: false });
  const legacyRuns = legacy.openDB<RunRecord, [string, string]>({ name: "runs", encoding: "msgpack" });
  for (let n = 0; n < 5; n++) await legacyRuns.put(["t", `run-${n}`], run(n));
  await legacy.close();

  let storage = openStorage(dir);
  for (let n = 0; n < 5; n++) expect(storage.runs.get(["t", `run-${n}`])).toEqual(run(n));
  // the same shapes written again now go through the shared structures
  for (let n = 5; n < 10; n++) await storage.runs.put(["t", `run-${n}`], run(n));
  const all = () => Array.from(storage.runs.getRange({})).map(({ key, value }) => [key, value]);
  const expected = Array.from({ length: 10 }, (_, n) => [["t", `run-${n}`], run(n)]);
  expect(all()).toEqual(expected);
  expect(Array.from(storage.runs.getRange({ reverse: true })).map(({ key }) => key)).toEqual(expected.map(([key]) => key).reverse());
  await storage.close();

  // and after reopening, the structures are read back from the file
  storage = openStorage(dir);
  expect(all()).toEqual(expected);
  await storage.close();

  // a new record is smaller than the same record written the old way: its keys are not in it
  const raw = open({ path: dataFilePath(dir), maxDbs: 32, compression: false });
  const bytes = raw.openDB({ name: "runs", encoding: "binary" });
  const oldSize = (bytes.getBinary(["t", "run-2"]) as Uint8Array).byteLength;
  const newSize = (bytes.getBinary(["t", "run-6"]) as Uint8Array).byteLength;
  await raw.close();
  expect(newSize).toBeLessThan(oldSize);
});

it("scans a DB in chunks: every record once, in key order, across chunk boundaries", async () => {
  const storage = openStorage(dir);
  for (let n = 0; n < 7; n++) await storage.runs.put(["t", `run-${n}`], run(n));
  const keys: unknown[] = [];
  for await (const { key } of entriesInChunks(storage.runs, 2)) keys.push(key);
  expect(keys).toEqual(Array.from({ length: 7 }, (_, n) => ["t", `run-${n}`]));
  await storage.close();
});
