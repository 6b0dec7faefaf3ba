// In-process A/B of the LMDB adapter's thread writes (issues 20/21): JS-thread CPU (this thread's
// /proc utime+stime, so lmdb-js' write thread is not counted) per thread create (threads.create,
// metadata {user_id}) and per run's two thread writes (runs.create + runs.finish, as the actor
// issues them), through each checkout's own adapter, alternating A and B every round so both see
// the same machine noise. Linux only; resolution is the clock tick (10 ms), hence the counts.
//
// Usage: npx tsx bench/thread-writes-ab.ts CHECKOUT_A CHECKOUT_B [CREATES=20000] [ROUNDS=6]
//   e.g. git worktree add --detach /tmp/ab-old <commit>; npx tsx bench/thread-writes-ab.ts /tmp/ab-old .
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { StoragePort } from "../src/storage/port.ts";
import type { RunRecord, ThreadRecord } from "../src/storage/records.ts";

const [coA, coB] = [path.resolve(process.argv[2] ?? "."), path.resolve(process.argv[3] ?? ".")];
const creates = Number(process.argv[4] ?? 20000);
const rounds = Number(process.argv[5] ?? 6);
const TICK_US = 1e6 / 100;

/** CPU µs this JS thread used so far */
function threadCpuUs(): number {
  const fields = fs.readFileSync("/proc/thread-self/stat", "utf8").split(") ")[1].split(" ");
  return (Number(fields[11]) + Number(fields[12])) * TICK_US;
}

let tick = 0;
const nextTime = (): string => new Date(Date.UTC(2026, 0, 1) + tick++).toISOString();
const thread = (id: string, over: Partial<ThreadRecord> = {}): ThreadRecord => {
  const t = nextTime();
  return { thread_id: id, created_at: t, updated_at: t, metadata: {}, status: "idle", config: {}, ...over };
};
const runOf = (threadId: string): RunRecord => ({
  run_id: crypto.randomUUID(),
  thread_id: threadId,
  assistant_id: "a",
  metadata: {},
  status: "pending",
  kwargs: { input: null, config: {}, stream_mode: ["values"], temporary: false, subgraphs: false, resumable: false },
  multitask_strategy: "enqueue",
  created_at: nextTime(),
  updated_at: nextTime(),
  graph_id: "echo",
  attempt: 0,
});

interface Side {
  name: string;
  port: StoragePort;
  dir: string;
}

async function open(checkout: string): Promise<Side> {
  const { openLmdbStorage } = (await import(path.join(checkout, "src/storage/lmdb/adapter.ts"))) as typeof import("../src/storage/lmdb/adapter.ts");
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "thread-writes-ab-"));
  return { name: path.basename(checkout), port: openLmdbStorage(dir), dir };
}

/** CPU µs per call of `op`, 64 in flight at a time */
async function perOp(n: number, op: () => Promise<unknown>): Promise<number> {
  const inFlight: Promise<unknown>[] = [];
  const start = threadCpuUs();
  for (let i = 0; i < n; i++) {
    inFlight.push(op());
    if (inFlight.length >= 64) await Promise.all(inFlight.splice(0));
  }
  await Promise.all(inFlight);
  return (threadCpuUs() - start) / n;
}

const METADATA = { graph_id: "echo", assistant_id: "fe096781-5601-53d2-b2f6-0d3403f7e9ca" };

async function round(s: Side): Promise<{ create: number; run: number }> {
  const create = await perOp(creates, () => s.port.threads.create(thread(crypto.randomUUID(), { metadata: { user_id: `u${tick % 1000}` } })));
  const id = crypto.randomUUID();
  let prev = thread(id, { metadata: METADATA });
  await s.port.threads.create(prev);
  const run = await perOp(creates / 2, () => {
    // as the actor: the run create copies the metadata into a new object; the finish keeps it
    const busy: ThreadRecord = { ...prev, metadata: { ...prev.metadata, ...METADATA }, status: "busy", updated_at: nextTime() };
    const r = runOf(id);
    const created = s.port.runs.create({ run: r, thread: busy, prev });
    const idle: ThreadRecord = { ...busy, status: "idle", updated_at: nextTime() };
    const finished = s.port.runs.finish({ run: { ...r, status: "success" }, thread: idle, prev: busy, valuesJson: Buffer.from("{}") });
    prev = idle;
    return Promise.all([created.committed, finished.committed]);
  });
  return { create, run };
}

const sides = [await open(coA), await open(coB)];
const seen = new Map<string, { create: number[]; run: number[] }>(sides.map((s) => [s.name, { create: [], run: [] }]));
for (let r = 0; r < rounds; r++) {
  for (const s of r % 2 === 0 ? sides : [...sides].reverse()) {
    const m = await round(s);
    seen.get(s.name)!.create.push(m.create);
    seen.get(s.name)!.run.push(m.run);
    console.log(`round ${r} ${s.name.padEnd(16)} create ${m.create.toFixed(1).padStart(6)} µs   run's two thread writes ${m.run.toFixed(1).padStart(6)} µs`);
  }
}
const median = (a: number[]): number => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
for (const [name, v] of seen)
  console.log(
    `median  ${name.padEnd(16)} create ${median(v.create).toFixed(1).padStart(6)} µs   run's two thread writes ${median(v.run).toFixed(1).padStart(6)} µs`,
  );
for (const s of sides) {
  await s.port.close();
  fs.rmSync(s.dir, { recursive: true, force: true });
}
