// `troupe migrate` (src/storage/migrate/): a data dir made by a real server run (assistants with
// versions, threads with runs, interrupts, subgraph namespaces and a long chunked message history,
// TTLs, store items with TTLs, crons, a webhook delivery in the outbox) is copied to PostgreSQL and
// back with the real CLI, and every record of every family — and every checkpoint tuple of every
// thread, with its pending writes — is the same in the source, in Postgres and in the copy back.
// A copy cut short continues from its progress record.
import { Client } from "@langchain/langgraph-sdk";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { copyDeployment } from "../../src/storage/migrate/copy.ts";
import type { MigrationEndpoint } from "../../src/storage/migrate/endpoint.ts";
import { openLmdbEndpoint } from "../../src/storage/migrate/lmdb-endpoint.ts";
import { openPostgresEndpoint } from "../../src/storage/migrate/postgres-endpoint.ts";
import { collect } from "../helpers/checkpoints.ts";
import { createTestDatabase, type TestDatabase } from "../helpers/postgres.ts";
import { REPO, startTestServer } from "../helpers/server.ts";

const human = (content: string) => ({ messages: [{ type: "human", content }] });
const quiet = () => undefined;

let source: string;
const dirs: string[] = [];
const databases: TestDatabase[] = [];

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "troupe-migrate-"));
  dirs.push(d);
  return d;
}

async function database(): Promise<TestDatabase> {
  const db = await createTestDatabase();
  databases.push(db);
  return db;
}

/** `troupe migrate …` as a user runs it: exit code and stderr */
function migrateCli(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [join(REPO, "bin/troupe.js"), "migrate", ...args], { cwd: REPO, stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    proc.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    proc.stdout.resume();
    proc.once("error", reject);
    proc.once("exit", (code) => resolve({ code, stderr }));
  });
}

beforeAll(async () => {
  const server = await startTestServer({ dataDir: tempDir() });
  source = server.dataDir;
  try {
    const client = new Client({ apiUrl: server.url, apiKey: null });
    const a = await client.assistants.create({ graphId: "echo", name: "Echo one", metadata: { team: "red", "nul\u0000key": "é" } });
    await client.assistants.update(a.assistant_id, { metadata: { round: 2 } });
    await client.assistants.update(a.assistant_id, { name: "Echo three" });
    await client.assistants.setLatest(a.assistant_id, 2);

    // a long conversation: 40 runs, 80 messages (message lists of 64+ are stored as shared chunks)
    const long = await client.threads.create({ metadata: { kind: "long" }, ttl: { ttl: 600, strategy: "delete" } });
    for (let i = 0; i < 40; i++) await client.runs.wait(long.thread_id, a.assistant_id, { input: human(`m${i}`) });
    const sub = await client.threads.create({ metadata: { kind: "subgraph" } });
    await client.runs.wait(sub.thread_id, "subgraph", { input: { messages: ["go"] } });
    const stopped = await client.threads.create({ metadata: { kind: "interrupted" } });
    await client.runs.wait(stopped.thread_id, "interrupt_steps", { input: { messages: ["start"] }, interruptBefore: ["two"] });
    const failed = await client.threads.create({ metadata: { kind: "error" } });
    await client.runs.wait(failed.thread_id, "error", { input: {} }).catch(() => undefined);
    // a delivery that cannot succeed stays in the outbox with its retry time
    const hooked = await client.threads.create({ metadata: { kind: "webhook" } });
    await client.runs.wait(hooked.thread_id, "echo", { input: human("hook"), webhook: "http://127.0.0.1:9/hook" });
    for (let i = 0; i < 5; i++) await client.threads.create({ metadata: { n: i, "k\u0000": "v\u0000" } });

    await client.store.putItem(["users", "ann"], "prefs", { theme: "dark", nested: { list: [1, "two", null] } });
    await client.store.putItem(["users", "bob"], "prefs", { theme: "light\u0000nul" }, { ttl: 120 });
    for (let i = 0; i < 12; i++) await client.store.putItem(["docs", `d${i % 3}`], `k${i}`, { i, text: `doc ${i}` });

    await client.crons.create(a.assistant_id, { schedule: "0 0 1 1 *", input: human("yearly"), metadata: { suite: "migrate" } });
    await client.crons.createForThread(long.thread_id, "echo", { schedule: "0 0 1 1 *", input: human("thread cron") });
  } finally {
    await server.stop();
  }
}, 180_000);

afterAll(async () => {
  for (const db of databases) await db.drop().catch(() => undefined);
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** every record of every family, and every thread's checkpoint tuples, as the endpoint reads them */
async function snapshot(e: MigrationEndpoint) {
  const assistants = (await collect(e.assistants())).map((c) => c.item);
  const crons = (await collect(e.crons())).map((c) => c.item);
  const store = (await collect(e.storeItems())).map((c) => c.item);
  const threads = (await collect(e.threads())).map((c) => c.item);
  const checkpoints: Record<string, unknown[]> = {};
  for (const t of threads) {
    checkpoints[t.record.thread_id] = (await collect(e.saver.list({ configurable: { thread_id: t.record.thread_id } }))).map((tuple) => ({
      config: tuple.config,
      parentConfig: tuple.parentConfig,
      checkpoint: tuple.checkpoint,
      metadata: tuple.metadata,
      pendingWrites: tuple.pendingWrites,
    }));
  }
  // the order of each family is the backend's own (LMDB and Postgres order store namespaces differently)
  const by = <T>(xs: T[], key: (x: T) => string) => [...xs].sort((x, y) => (key(x) < key(y) ? -1 : key(x) > key(y) ? 1 : 0));
  return {
    assistants: by(assistants, (a) => a.record.assistant_id),
    crons: by(crons, (c) => c.cron_id),
    store: by(store, (s) => JSON.stringify([s.record.namespace, s.record.key])),
    threads: by(threads, (t) => t.record.thread_id),
    checkpoints,
  };
}

async function snapshotOf(where: string): Promise<Awaited<ReturnType<typeof snapshot>>> {
  const e = where.startsWith("postgres") ? await openPostgresEndpoint(where) : openLmdbEndpoint(where, quiet);
  try {
    return await snapshot(e);
  } finally {
    await e.close();
  }
}

describe("troupe migrate", () => {
  it("round-trips a data dir through PostgreSQL and back: every record and checkpoint the same", async () => {
    const original = await snapshotOf(source);
    // the run made what the comparison must cover
    expect(original.assistants.length).toBeGreaterThanOrEqual(2);
    expect(original.assistants.some((a) => a.versions.length === 3)).toBe(true);
    expect(original.threads.length).toBe(10);
    expect(original.threads.some((t) => t.ttl === 600)).toBe(true);
    expect(original.threads.some((t) => t.record.status === "interrupted")).toBe(true);
    expect(original.threads.some((t) => t.record.status === "error")).toBe(true);
    expect(original.threads.flatMap((t) => t.runs).length).toBeGreaterThanOrEqual(44);
    expect(original.threads.some((t) => t.deliveries.length === 1)).toBe(true);
    expect(original.store.length).toBe(14);
    expect(original.store.filter((s) => s.ttl !== undefined).length).toBe(1);
    expect(original.crons.length).toBe(2);
    const tuples = Object.values(original.checkpoints).flat() as { config: { configurable: { checkpoint_ns: string } }; pendingWrites: unknown[] }[];
    expect(tuples.length).toBeGreaterThan(120);
    expect(tuples.some((t) => t.config.configurable.checkpoint_ns !== "")).toBe(true);
    expect(tuples.some((t) => t.pendingWrites.length > 0)).toBe(true);

    const db = await database();
    // batches of 5: threads and store items go in several batches, each one target write
    const there = await migrateCli(["--from", source, "--to", db.uri, "--batch", "5", "--progress-every", "5"]);
    expect(there.code, there.stderr).toBe(0);
    // not a terminal: a line per 5 records (each batch) and at each family's end
    expect(there.stderr).toMatch(/threads\s+5\/10 \[/);
    expect(there.stderr).toMatch(/threads\s+10\/10 \[#+\] 100%/);
    expect(there.stderr).toContain(`done: ${original.assistants.length} assistants, 2 crons, 14 store, 10 threads`);
    expect(await snapshotOf(db.uri)).toEqual(original);

    const back = join(tempDir(), "back");
    const home = await migrateCli(["--from", db.uri, "--to", back]);
    expect(home.code, home.stderr).toBe(0);
    expect(await snapshotOf(back)).toEqual(original);

    // the copy back serves: a server on it answers the same thread state and searches
    const server = await startTestServer({ dataDir: back });
    try {
      const client = new Client({ apiUrl: server.url, apiKey: null });
      const long = (await client.threads.search({ metadata: { kind: "long" } }))[0];
      const state = await client.threads.getState<{ messages: unknown[] }>(long.thread_id);
      expect(state.values.messages).toHaveLength(80);
      const history = await client.threads.getHistory(long.thread_id, { limit: 200 });
      expect(history.length).toBe(original.checkpoints[long.thread_id].length);
      expect((await client.store.searchItems(["docs"], { limit: 50 })).items).toHaveLength(12);
      // and runs on, on top of the copied history
      await client.runs.wait(long.thread_id, "echo", { input: human("after") });
      expect((await client.threads.getState<{ messages: unknown[] }>(long.thread_id)).values.messages).toHaveLength(82);
    } finally {
      await server.stop();
    }
  }, 240_000);

  it("a copy cut short continues where its progress record says; a finished copy copies nothing again", async () => {
    const db = await database();
    const from = openLmdbEndpoint(source, quiet);
    let to = await openPostgresEndpoint(db.uri);
    try {
      const seen: string[] = [];
      const cut = copyDeployment(from, to, {
        batch: 3,
        onProgress(family, done) {
          seen.push(`${family}:${done}`);
          if (family === "threads" && done === 6) throw new Error("cut");
        },
      });
      await expect(cut).rejects.toThrow("cut");
      await to.close();
      to = await openPostgresEndpoint(db.uri);
      const rest = await copyDeployment(from, to, { batch: 3 });
      // families finished before the cut are not copied again; the threads continue after the sixth
      expect(rest.resumed).toEqual(["assistants", "crons", "store"]);
      expect(rest.copied.threads).toBe(4);
      expect(await snapshot(to)).toEqual(await snapshot(from));
      const again = await copyDeployment(from, to);
      expect(again.copied).toEqual({ assistants: 0, crons: 0, store: 0, threads: 0 });
      // with its progress record gone, a copy into the full target replaces every thread's
      // checkpoints (the target has them, so each is cleared first) instead of adding to them
      await (to as unknown as { pool: { query(sql: string): Promise<unknown> } }).pool.query("DELETE FROM troupe_migrate_progress");
      const [first] = (await collect(to.threads())).map((c) => c.item.record.thread_id);
      const latest = await to.saver.getTuple({ configurable: { thread_id: first } });
      expect(latest).toBeDefined();
      const stray = { ...latest!.checkpoint, id: "1fffffff-ffff-6fff-bfff-ffffffffffff" };
      await to.saver.put({ configurable: { thread_id: first, checkpoint_ns: "" } }, stray, latest!.metadata!, {});
      expect(await snapshot(to)).not.toEqual(await snapshot(from));
      const over = await copyDeployment(from, to, { batch: 4 });
      expect(over.copied.threads).toBe(10);
      expect(await snapshot(to)).toEqual(await snapshot(from));
    } finally {
      await to.close();
      await from.close();
    }
  }, 120_000);

  it("refuses what it cannot do, with a usage error", async () => {
    const same = await migrateCli(["--from", source, "--to", tempDir()]);
    expect(same.code).toBe(2);
    expect(same.stderr).toMatch(/one of --from\/--to must be a postgres:\/\/ URI/);
    const missing = await migrateCli(["--from", source]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/needs --from and --to/);
  });
});
