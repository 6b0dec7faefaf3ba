// The storage port's contract (docs/STORAGE.md, src/storage/port.ts), one set of cases run against
// every adapter (test/helpers/storage-factories.ts): every operation of every family, the atomic
// units and conditional writes (concurrent creators, patchers and cron updaters), the per-thread
// issue order of writes, TTL sweeps. Each adapter gets a fresh, empty storage. Run writes,
// checkpoints and the write order run where the adapter has the whole port (Postgres; the LMDB
// adapter has the families wired so far: storage-factories.ts).
import { uuid6 } from "@langchain/langgraph-checkpoint";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Issued, RunKey, StoragePort } from "../../src/storage/port.ts";
import type { AssistantRecord, CronRecord, RunRecord, RunStatus, ThreadRecord } from "../../src/storage/records.ts";
import { cfg, checkpoint, collect, meta } from "../helpers/checkpoints.ts";
import { STORAGE_FACTORIES, type StorageUnderTest } from "../helpers/storage-factories.ts";
import { runRecord, T0, threadRecord } from "../helpers/records.ts";

const at = (s: number): string => new Date(Date.parse(T0) + s * 1000).toISOString();
let serial = 0;
/** ids that sort in creation order, as UUID v7 run ids do */
const nextId = (prefix: string): string => `${prefix}-${String(++serial).padStart(6, "0")}`;

const thread = threadRecord;
const run = (threadId: string, over: Partial<RunRecord> = {}): RunRecord => runRecord(threadId, nextId("run"), over);

function assistant(id: string, over: Partial<AssistantRecord> = {}): AssistantRecord {
  return {
    assistant_id: id,
    version: 1,
    config: {},
    context: {},
    created_at: T0,
    updated_at: T0,
    graph_id: "g",
    metadata: {},
    name: id,
    description: null,
    ...over,
  };
}

function cron(id: string, over: Partial<CronRecord> = {}): CronRecord {
  return {
    cron_id: id,
    assistant_id: "asst-1",
    thread_id: null,
    on_run_completed: null,
    end_time: null,
    schedule: "* * * * *",
    timezone: null,
    created_at: T0,
    updated_at: T0,
    payload: {},
    user_id: null,
    next_run_date: at(60),
    metadata: {},
    enabled: true,
    ...over,
  } as CronRecord;
}

const ids = <R>(rs: R[], key: keyof R): unknown[] => rs.map((r) => r[key]);

describe.each(STORAGE_FACTORIES)("storage port on $name", (factory) => {
  let under: StorageUnderTest;
  let s: StoragePort;
  /** the whole port (factories with `whole`) */
  let w: StoragePort;
  /** the thread record each thread's writes last gave (the actor's `prev`: LMDB diffs index entries against it) */
  const last = new Map<string, ThreadRecord>();
  const wrote = (t: ThreadRecord): ThreadRecord | undefined => {
    const prev = last.get(t.thread_id);
    last.set(t.thread_id, t);
    return prev;
  };
  const createThread = (t: ThreadRecord, values?: string) => (wrote(t), s.threads.create(t, values));
  const saveThread = (t: ThreadRecord, values?: string) => s.threads.save(t, values, wrote(t));
  const createRun = (r: RunRecord, t: ThreadRecord): Issued => w.runs.create({ run: r, thread: t, prev: wrote(t) });
  const finishRun = (end: { run: RunRecord | { rolledBack: RunKey }; thread: ThreadRecord; valuesJson: Uint8Array | undefined }): Issued =>
    w.runs.finish({ ...end, prev: wrote(end.thread)! });
  const activeIds = async (threadId?: string): Promise<string[]> => (await collect(s.runs.active(threadId))).map((a) => a.runId);

  beforeAll(async () => {
    under = await factory.open();
    s = under.port;
    w = under.whole ?? s;
  });
  afterAll(async () => {
    await under?.dispose();
  });

  describe("assistants", () => {
    it("create is conditional on the id; get returns the record as written", async () => {
      const a = assistant("a-create", { metadata: { k: "v\u0000", n: 1.5 }, config: { configurable: { x: [1, { y: null }] } } });
      expect(await s.assistants.create(a)).toEqual(a);
      expect(await s.assistants.create(assistant("a-create", { name: "other" }))).toBe("exists");
      expect(JSON.stringify(await s.assistants.get("a-create"))).toBe(JSON.stringify(a));
      expect(await s.assistants.get("a-missing")).toBeUndefined();
      expect(await s.assistants.versions("a-create", { offset: 0, limit: 10 })).toEqual([
        expect.objectContaining({ assistant_id: "a-create", version: 1, name: "a-create", metadata: a.metadata }),
      ]);
    });

    it("patch makes version max+1 from the latest; setLatest brings an old version back; versions newest first", async () => {
      await s.assistants.create(assistant("a-patch", { metadata: { a: 1 } }));
      const p2 = await s.assistants.patch("a-patch", { metadata: { b: 2 }, name: "two" }, at(2));
      expect(p2).toMatchObject({ version: 2, name: "two", metadata: { a: 1, b: 2 }, updated_at: at(2), created_at: T0 });
      const p3 = await s.assistants.patch("a-patch", { description: "three" }, at(3));
      expect(p3).toMatchObject({ version: 3, name: "two", description: "three" });
      const back = await s.assistants.setLatest("a-patch", 1, at(4));
      expect(back).toMatchObject({ version: 1, name: "a-patch", metadata: { a: 1 }, updated_at: at(4) });
      expect(await s.assistants.get("a-patch")).toEqual(back);
      // a patch after setLatest(1) is still max+1, from the latest record (version 1's fields)
      expect(await s.assistants.patch("a-patch", {}, at(5))).toMatchObject({ version: 4, name: "a-patch" });
      expect(ids(await s.assistants.versions("a-patch", { offset: 0, limit: 10 }), "version")).toEqual([4, 3, 2, 1]);
      expect(ids(await s.assistants.versions("a-patch", { offset: 1, limit: 2 }), "version")).toEqual([3, 2]);
      expect(ids(await s.assistants.versions("a-patch", { metadata: { b: 2 }, offset: 0, limit: 10 }), "version")).toEqual([3, 2]);
      expect(await s.assistants.patch("a-missing", {}, at(6))).toBeUndefined();
      expect(await s.assistants.setLatest("a-patch", 99, at(6))).toBe("no-version");
      expect(await s.assistants.setLatest("a-missing", 1, at(6))).toBeUndefined();
    });

    it("concurrent patches each make their own version (read-modify-write is atomic)", async () => {
      await s.assistants.create(assistant("a-race"));
      const results = await Promise.all(Array.from({ length: 12 }, (_, i) => s.assistants.patch("a-race", { metadata: { [`k${i}`]: i } }, at(10 + i))));
      expect(results.map((r) => r!.version).sort((x, y) => x - y)).toEqual(Array.from({ length: 12 }, (_, i) => i + 2));
      const latest = await s.assistants.get("a-race");
      expect(latest!.version).toBe(13);
      // every patch merged into the one before it: the latest has all twelve keys
      expect(Object.keys(latest!.metadata).sort()).toEqual(Array.from({ length: 12 }, (_, i) => `k${i}`).sort());
      expect((await s.assistants.versions("a-race", { offset: 0, limit: 100 })).length).toBe(13);
    });

    it("concurrent creators of one id: exactly one wins; ensureDefaults is idempotent", async () => {
      const outcomes = await Promise.all(Array.from({ length: 8 }, (_, i) => s.assistants.create(assistant("a-once", { name: `n${i}` }))));
      expect(outcomes.filter((o) => o !== "exists")).toHaveLength(1);
      const defaults = [assistant("a-default-1", { metadata: { created_by: "system" } }), assistant("a-default-2")];
      await Promise.all([s.assistants.ensureDefaults(defaults), s.assistants.ensureDefaults(defaults), s.assistants.ensureDefaults(defaults)]);
      await s.assistants.patch("a-default-1", { name: "renamed" }, at(1));
      await s.assistants.ensureDefaults(defaults); // present: left as it is
      expect(await s.assistants.get("a-default-1")).toMatchObject({ name: "renamed", version: 2 });
      expect((await s.assistants.versions("a-default-2", { offset: 0, limit: 10 })).length).toBe(1);
    });

    it("delete removes the record and every version", async () => {
      await s.assistants.create(assistant("a-del"));
      await s.assistants.patch("a-del", {}, at(1));
      expect(await s.assistants.delete("a-del")).toBe(true);
      expect(await s.assistants.get("a-del")).toBeUndefined();
      expect(await s.assistants.versions("a-del", { offset: 0, limit: 10 })).toEqual([]);
      expect(await s.assistants.delete("a-del")).toBe(false);
      // the id can be created again, from version 1
      expect(await s.assistants.create(assistant("a-del"))).not.toBe("exists");
      expect((await s.assistants.versions("a-del", { offset: 0, limit: 10 })).length).toBe(1);
    });

    it("forRun: the record as get has it, from a cache only with a check (PostgreSQL; LMDB reads each time); none once deleted", async () => {
      const a = assistant("a-for-run");
      await s.assistants.create(a);
      expect(await s.assistants.forRun("a-for-run", false)).toEqual({ record: a }); // read now: nothing to check
      const again = await s.assistants.forRun("a-for-run", false);
      expect(again?.record).toEqual(a);
      expect(again?.check !== undefined).toBe(factory.name === "postgres");
      expect(await s.assistants.forRun("a-for-run", true)).toEqual({ record: a });
      const patched = await s.assistants.patch("a-for-run", { name: "two" }, at(2));
      expect(await s.assistants.forRun("a-for-run", false)).toEqual({ record: patched }); // its own write dropped the entry
      expect(await s.assistants.delete("a-for-run")).toBe(true);
      expect(await s.assistants.forRun("a-for-run", false)).toBeUndefined();
      expect(await s.assistants.forRun("a-missing", false)).toBeUndefined();
    });

    it("search and count: filters, sorts with ties broken by created_at then id, paging, totals", async () => {
      const g = `graph-${nextId("g")}`;
      await s.assistants.create(assistant("s-b", { graph_id: g, name: "Beta", created_at: at(1), metadata: { team: "x" } }));
      await s.assistants.create(assistant("s-a", { graph_id: g, name: "alpha", created_at: at(1), metadata: { team: "x", tags: ["p", "q"] } }));
      await s.assistants.create(assistant("s-c", { graph_id: g, name: "ALPHABET", created_at: at(0), metadata: { team: "y" } }));
      const page = await s.assistants.search({ graph_id: g, sortBy: "created_at", order: "asc", offset: 0, limit: 2 });
      expect({ ids: ids(page.items, "assistant_id"), total: page.total }).toEqual({ ids: ["s-c", "s-a"], total: 3 });
      const desc = await s.assistants.search({ graph_id: g, sortBy: "created_at", order: "desc", offset: 1, limit: 5 });
      expect(ids(desc.items, "assistant_id")).toEqual(["s-a", "s-c"]);
      expect(desc.total).toBe(3);
      expect(ids((await s.assistants.search({ graph_id: g, name: "alpha", sortBy: "name", order: "asc", offset: 0, limit: 5 })).items, "assistant_id")).toEqual(
        ["s-c", "s-a"],
      );
      expect(await s.assistants.count({ graph_id: g, metadata: { team: "x" } })).toBe(2);
      expect(await s.assistants.count({ graph_id: g, auth: { tags: { $contains: "q" } } })).toBe(1);
      expect(await s.assistants.count({ graph_id: g, metadata: { team: null } })).toBe(0);
      const past = await s.assistants.search({ graph_id: g, sortBy: "assistant_id", order: "asc", offset: 10, limit: 5 });
      expect(past).toEqual({ items: [], total: 3 });
    });
  });

  describe("threads", () => {
    it("create is conditional; save replaces the record and keeps the values unless given", async () => {
      const id = nextId("t");
      const t = thread(id, { metadata: { owner: "ann" } });
      expect(await s.threads.create(t, '{"n":1}')).toEqual(t);
      expect(await s.threads.create(thread(id), '{"n":2}')).toBe("exists");
      expect(await s.threads.valuesJson(id)).toBe('{"n":1}');
      await s.threads.save({ ...t, status: "busy", updated_at: at(1) }, undefined, t);
      expect(await s.threads.get(id)).toMatchObject({ status: "busy", updated_at: at(1), metadata: { owner: "ann" } });
      expect(await s.threads.valuesJson(id)).toBe('{"n":1}');
      await s.threads.save({ ...t, updated_at: at(2) }, '{"n":"\\u0000 two"}', { ...t, status: "busy", updated_at: at(1) });
      expect(await s.threads.valuesJson(id)).toBe('{"n":"\\u0000 two"}');
      const bare = nextId("t");
      await s.threads.create(thread(bare));
      expect(await s.threads.valuesJson(bare)).toBeUndefined();
      expect(await s.threads.get(nextId("t"))).toBeUndefined();
    });

    it("search: status, ids, metadata, values; count", async () => {
      const tag = nextId("tag");
      const a = nextId("t");
      const b = nextId("t");
      const c = nextId("t");
      await s.threads.create(thread(a, { metadata: { tag }, status: "idle", created_at: at(3) }), '{"messages":[],"k":1}');
      await s.threads.create(thread(b, { metadata: { tag }, status: "busy", created_at: at(2) }), '{"k":2}');
      await s.threads.create(thread(c, { metadata: { tag, x: { y: 1 } }, status: "idle", created_at: at(1) }));
      const all = await s.threads.search({ metadata: { tag }, sortBy: "created_at", order: "asc", offset: 0, limit: 10 });
      expect(ids(all.items, "thread_id")).toEqual([c, b, a]);
      expect(all.total).toBe(3);
      expect(
        ids((await s.threads.search({ metadata: { tag }, status: "idle", sortBy: "thread_id", order: "desc", offset: 0, limit: 10 })).items, "thread_id"),
      ).toEqual([c, a]);
      expect(await s.threads.count({ metadata: { tag }, values: { k: 2 } })).toBe(1);
      expect(await s.threads.count({ metadata: { tag, x: { y: 1 } } })).toBe(1);
      expect(await s.threads.count({ ids: [a, c, "nope"] })).toBe(2);
    });

    it("TTLs: set, replace, clear; sweep candidates in id order after a cursor", async () => {
      const [a, b, c] = [nextId("ttl"), nextId("ttl"), nextId("ttl")];
      for (const id of [a, b, c]) await s.threads.create(thread(id, { updated_at: at(7) }));
      await s.threads.setTtl(a, 5);
      await s.threads.setTtl(c, 1.5);
      await s.threads.setTtl(c, 2);
      expect(await s.threads.ttl(a)).toBe(5);
      expect(await s.threads.ttl(b)).toBeUndefined();
      expect(await s.threads.ttl(c)).toBe(2);
      const own = await s.threads.sweepCandidates({ all: false, after: a.slice(0, 3), limit: 100 });
      expect(own.filter((x) => [a, b, c].includes(x))).toEqual([a, c]);
      expect(await s.threads.sweepCandidates({ all: true, after: a, limit: 2 })).toEqual([b, c]);
      expect(await s.threads.sweepCandidates({ all: false, after: a, limit: 1 })).toEqual([c]);
      await s.threads.setTtl(a, null);
      expect(await s.threads.ttl(a)).toBeUndefined();
    });

    it("delete removes the record, its values, TTL and runs (checkpoints stay for CheckpointPort)", async () => {
      const id = nextId("t");
      await s.threads.create(thread(id), '{"v":1}');
      await s.threads.setTtl(id, 10);
      const r = run(id);
      await under.seedRun(r, thread(id, { status: "busy" }));
      const saver = under.whole ? (await under.whole.checkpoints.open()).saver() : undefined;
      await saver?.put(cfg(id), checkpoint({ v: 1 }, { v: 1 }), meta(0), { v: 1 });
      await s.threads.delete(id);
      expect(await s.threads.get(id)).toBeUndefined();
      expect(await s.threads.valuesJson(id)).toBeUndefined();
      expect(await s.threads.ttl(id)).toBeUndefined();
      expect(await s.runs.get(id, r.run_id)).toBeUndefined();
      expect(await s.runs.threadOf(r.run_id)).toBeUndefined();
      expect(await activeIds(id)).toEqual([]);
      if (saver === undefined) return;
      expect(await saver.getTuple(cfg(id))).toBeDefined();
      await saver.deleteThread(id);
      expect(await saver.getTuple(cfg(id))).toBeUndefined();
    });
  });

  describe("run reads", () => {
    it("list oldest first with status and paging; latest; ofAssistant; active; delete; dropActive", async () => {
      const id = nextId("t");
      const other = nextId("t");
      await s.threads.create(thread(id));
      await s.threads.create(thread(other));
      const statuses: RunStatus[] = ["success", "error", "success", "pending", "success"];
      const runs = statuses.map((status, i) => run(id, { status, assistant_id: i % 2 === 0 ? "asst-even" : "asst-odd" }));
      for (const r of runs) await under.seedRun(r, thread(id));
      const elsewhere = run(other, { assistant_id: "asst-even" });
      await under.seedRun(elsewhere, thread(other));
      expect(ids(await s.runs.list(id, { offset: 0, limit: 10 }), "run_id")).toEqual(ids(runs, "run_id"));
      expect(ids(await s.runs.list(id, { offset: 1, limit: 2 }), "run_id")).toEqual([runs[1].run_id, runs[2].run_id]);
      expect(ids(await s.runs.list(id, { status: "success", offset: 1, limit: 10 }), "run_id")).toEqual([runs[2].run_id, runs[4].run_id]);
      expect((await s.runs.latest(id))!.run_id).toBe(runs[4].run_id);
      expect(await s.runs.latest(nextId("t"))).toBeUndefined();
      expect(ids(await collect(s.runs.ofAssistant("asst-even", id)), "run_id")).toEqual([runs[0].run_id, runs[2].run_id, runs[4].run_id]);
      expect(ids(await collect(s.runs.ofAssistant("asst-even")), "run_id")).toEqual(expect.arrayContaining([runs[0].run_id, elsewhere.run_id]));
      const allActive = await activeIds();
      expect(allActive).toEqual(expect.arrayContaining([runs[3].run_id, elsewhere.run_id]));
      expect(allActive.indexOf(runs[3].run_id) >= 0 && !allActive.includes(runs[0].run_id)).toBe(true);
      expect(await activeIds(other)).toEqual([elsewhere.run_id]);
      expect((await collect(s.runs.active(other)))[0]).toEqual({ threadId: other, runId: elsewhere.run_id, run: elsewhere });
      if (!factory.whole) return;
      // delete: a finished run's record and run->thread entry go
      await w.runs.delete(id, runs[2].run_id);
      expect(await s.runs.get(id, runs[2].run_id)).toBeUndefined();
      expect(await s.runs.exists(id, runs[2].run_id)).toBe(false);
      expect(await s.runs.exists(id, runs[1].run_id)).toBe(true);
      expect(await s.runs.threadOf(runs[2].run_id)).toBeUndefined();
      expect(await activeIds(id)).toEqual([runs[3].run_id]);
      await w.runs.dropActive({ threadId: id, runId: runs[2].run_id }); // no entry: nothing to drop, no error
    });
  });

  describe.runIf(factory.whole)("run writes and write order (whole port)", () => {
    it("create, start, finish: the run and the thread record change together; active until finished", async () => {
      const id = nextId("t");
      await s.threads.create(thread(id), '{"before":true}');
      const r = run(id);
      await createRun(r, thread(id, { status: "busy", updated_at: at(1) })).committed;
      expect(await s.threads.get(id)).toMatchObject({ status: "busy", updated_at: at(1) });
      expect(await s.runs.get(id, r.run_id)).toEqual(r);
      expect(await s.runs.threadOf(r.run_id)).toBe(id);
      expect(await activeIds(id)).toEqual([r.run_id]);
      const running: RunRecord = { ...r, status: "running", attempt: 1, started_at: at(2) };
      await w.runs.save(running).committed;
      expect(await s.runs.get(id, r.run_id)).toEqual(running);
      expect((await collect(s.runs.active(id))).map((a) => a.run?.status)).toEqual(["running"]);
      const done: RunRecord = { ...running, status: "success", ended_at: at(3), updated_at: at(3) };
      await finishRun({ run: done, thread: thread(id, { status: "idle", updated_at: at(3) }), valuesJson: Buffer.from('{"after":1}') }).committed;
      expect(await s.runs.get(id, r.run_id)).toEqual(done);
      expect(await activeIds(id)).toEqual([]);
      expect(await s.threads.get(id)).toMatchObject({ status: "idle", updated_at: at(3) });
      expect(await s.threads.valuesJson(id)).toBe('{"after":1}');
    });

    it("finish: the values given are the thread's, undefined clears them; a rolled-back run is removed", async () => {
      const id = nextId("t");
      await s.threads.create(thread(id), '{"keep":1}');
      const r1 = run(id);
      await createRun(r1, thread(id, { status: "busy" })).committed;
      await finishRun({ run: { ...r1, status: "error" }, thread: thread(id, { status: "error" }), valuesJson: Buffer.from('{"keep":1}') }).committed;
      expect(await s.threads.valuesJson(id)).toBe('{"keep":1}');
      const r2 = run(id);
      await createRun(r2, thread(id, { status: "busy" })).committed;
      await finishRun({ run: { rolledBack: { threadId: id, runId: r2.run_id } }, thread: thread(id), valuesJson: undefined }).committed;
      expect(await s.runs.get(id, r2.run_id)).toBeUndefined();
      expect(await s.runs.threadOf(r2.run_id)).toBeUndefined();
      expect(await activeIds(id)).toEqual([]);
      expect(await s.threads.valuesJson(id)).toBeUndefined();
      expect(ids(await s.runs.list(id, { offset: 0, limit: 10 }), "run_id")).toEqual([r1.run_id]);
    });

    it("active() lists each thread's runs oldest first, across many (more than one read batch)", async () => {
      const id = nextId("t");
      await s.threads.create(thread(id));
      const made: string[] = [];
      const committed: Promise<void>[] = [];
      for (let i = 0; i < 620; i++) {
        const r = run(id, { status: i % 2 === 0 ? "pending" : "running" });
        made.push(r.run_id);
        committed.push(createRun(r, thread(id)).committed);
      }
      await Promise.all(committed);
      const got = await activeIds(id);
      expect(got).toEqual(made);
    });

    it("writes issued for one thread commit in issue order, without awaiting in between", async () => {
      const id = nextId("t");
      await createThread(thread(id));
      const r = run(id);
      const saver = (await w.checkpoints.open()).saver();
      // the actor's sequence: create, start, a checkpoint, finish, the next run: nothing awaited
      const created = createRun(r, thread(id, { status: "busy", updated_at: at(1) }));
      const started = w.runs.save({ ...r, status: "running", attempt: 1 });
      const put = saver.put(cfg(id), checkpoint({ v: 1 }, { v: 1 }), meta(0, { run_id: r.run_id }), { v: 1 });
      const finished = finishRun({
        run: { ...r, status: "success", attempt: 1 },
        thread: thread(id, { status: "idle", updated_at: at(2) }),
        valuesJson: Buffer.from("[1]"),
      });
      const r2 = run(id);
      const next = createRun(r2, thread(id, { status: "busy", updated_at: at(3) }));
      const saved = saveThread(thread(id, { status: "busy", updated_at: at(4), metadata: { last: true } }));
      await Promise.all([created.committed, started.committed, put, finished.committed, next.committed, saved]);
      expect(await s.runs.get(id, r.run_id)).toMatchObject({ status: "success", attempt: 1 });
      expect(await s.runs.get(id, r2.run_id)).toMatchObject({ status: "pending" });
      expect(await s.threads.get(id)).toMatchObject({ status: "busy", updated_at: at(4), metadata: { last: true } });
      expect(await s.threads.valuesJson(id)).toBe("[1]");
      expect(await saver.hasCheckpointOfRun(id, r.run_id)).toBe(true);
    });

    it("issue order holds for every step, on many threads at once, and leaves the index as the last write", async () => {
      const threads = Array.from({ length: 20 }, () => nextId("t"));
      const step1 = { step: nextId("one") };
      const step2 = { step: nextId("two") };
      const pending: Promise<unknown>[] = [];
      const runs = threads.map((id) => {
        // each step would be lost or undone if it reached the database before the one issued before it
        // (LMDB: thread creates are conditional batches, saves write transactions, run writes batches)
        pending.push(createThread(thread(id)));
        pending.push(saveThread(thread(id, { metadata: step1 }), '{"step":1}'));
        const r = run(id);
        pending.push(createRun(r, thread(id, { status: "busy", metadata: step2 })).committed);
        pending.push(w.runs.save({ ...r, status: "running", attempt: 1 }).committed);
        return r;
      });
      await Promise.all(pending);
      for (const [i, id] of threads.entries()) {
        expect(await s.runs.get(id, runs[i].run_id)).toMatchObject({ status: "running", attempt: 1 });
        expect(await s.threads.get(id)).toMatchObject({ status: "busy", metadata: step2 });
        expect(await s.threads.valuesJson(id)).toBe('{"step":1}');
      }
      // (one exact term: LMDB counts it from the index alone, so a stale entry would show)
      expect(await s.threads.count({ metadata: step1 })).toBe(0);
      expect(await s.threads.count({ metadata: step2 })).toBe(threads.length);
    });

    it("holdWritesUntil: the thread's later writes wait for the barrier, other threads do not", async () => {
      const id = nextId("t");
      const free = nextId("t");
      await createThread(thread(id));
      await createThread(thread(free));
      const saver = (await w.checkpoints.open()).saver();
      let release!: () => void;
      saver.holdWritesUntil(id, new Promise<void>((resolve) => (release = resolve)));
      // (put resolves once queued on both backends; that the row waits for the barrier is each
      // saver's own test: checkpointer-postgres.test.ts, the LMDB saver's write-queue tests)
      const held = saver.put(cfg(id), checkpoint({ v: 1 }, { v: 1 }), meta(0), { v: 1 });
      await saveThread(thread(free, { status: "busy" })); // another thread's write goes through
      expect(await s.threads.get(free)).toMatchObject({ status: "busy" });
      release();
      await held;
      expect(await saver.getTuple(cfg(id))).toBeDefined();
    });

    it("holdWritesUntil with refuseUntil: a rejected barrier fails the writes behind it and those issued until refuseUntil; none is written", async () => {
      const id = nextId("t");
      await createThread(thread(id));
      const saver = (await w.checkpoints.open()).saver();
      let fail!: (err: Error) => void;
      let end!: () => void;
      const barrier = new Promise<void>((_, reject) => (fail = reject));
      saver.holdWritesUntil(id, barrier, new Promise<void>((resolve) => (end = resolve)));
      // (a run started before its create committed: its checkpoints queue behind the create)
      const first = await saver.put(cfg(id), checkpoint({ v: 1 }, { v: 1 }), meta(0, { run_id: "dropped" }), { v: 1 });
      await saver.putWrites(cfg(id, first.configurable!.checkpoint_id as string), [["v", 2]], "task-1").catch(() => undefined);
      fail(new Error("the create failed"));
      await new Promise((r) => setTimeout(r, 20));
      // issued after the refusal, before refuseUntil settled: refused too (now or by the next write or read)
      await saver
        .put(cfg(id, first.configurable!.checkpoint_id as string), { ...checkpoint({ v: 2 }, { v: 2 }), id: uuid6(-1) }, meta(1, { run_id: "dropped" }), {
          v: 2,
        })
        .catch(() => undefined);
      end();
      await saver.flush(id).catch(() => undefined); // the failure is reported (once)
      expect(await saver.hasCheckpointOfRun(id, "dropped")).toBe(false);
      expect(await saver.getTuple(cfg(id))).toBeUndefined();
      // once refuseUntil settled the thread's writes go through again
      await saver.put(cfg(id), { ...checkpoint({ v: 3 }, { v: 3 }), id: uuid6(-1) }, meta(0, { run_id: "next" }), { v: 3 });
      expect((await saver.getTuple(cfg(id)))?.checkpoint.channel_values).toEqual({ v: 3 });
      expect(await saver.hasCheckpointOfRun(id, "next")).toBe(true);
    });
  });

  describe.runIf(factory.whole)("checkpoints (whole port)", () => {
    it("a saver on the port: put, putWrites, list, rollback of a run, prune, copy, metadata patch", async () => {
      const id = nextId("t");
      const saver = (await w.checkpoints.open()).saver();
      const first = await saver.put(cfg(id), checkpoint({ a: 1, b: [1] }, { a: 1, b: 1 }), meta(0, { run_id: "r1" }), { a: 1, b: 1 });
      const c1 = first.configurable!.checkpoint_id as string;
      await saver.putWrites(
        cfg(id, c1),
        [
          ["a", 2],
          ["b", [2]],
        ],
        "task-1",
      );
      await saver.putWrites(cfg(id, c1), [["a", 99]], "task-1"); // first write of an idx wins
      const second = await saver.put(cfg(id, c1), { ...checkpoint({ a: 2, b: [1] }, { a: 2, b: 1 }), id: uuid6(-1) }, meta(1, { run_id: "r2" }), { a: 2 });
      const c2 = second.configurable!.checkpoint_id as string;
      const t1 = await saver.getTuple(cfg(id, c1));
      expect(t1!.pendingWrites).toEqual([
        ["task-1", "a", 2],
        ["task-1", "b", [2]],
      ]);
      const latest = await saver.getTuple(cfg(id));
      expect(latest!.checkpoint.channel_values).toEqual({ a: 2, b: [1] });
      expect(latest!.parentConfig?.configurable?.checkpoint_id).toBe(c1);
      expect((await collect(saver.list(cfg(id)))).map((t) => t.config.configurable!.checkpoint_id)).toEqual([c2, c1]);
      expect(await saver.hasCheckpoint(id, "", c1)).toBe(true);
      expect(await saver.patchMetadata(id, { note: "x" })).toBe(true);
      expect((await saver.getTuple(cfg(id)))!.metadata).toMatchObject({ note: "x", step: 1 });
      const copy = nextId("t");
      await saver.copyThread(id, copy);
      expect((await saver.getTuple(cfg(copy)))!.checkpoint.channel_values).toEqual({ a: 2, b: [1] });
      await saver.deleteCheckpointsOfRun(id, "r2");
      expect(await saver.hasCheckpointOfRun(id, "r2")).toBe(false);
      expect((await saver.getTuple(cfg(id)))!.checkpoint.id).toBe(c1);
      expect(await saver.pruneToLatest(copy)).toBe(1);
      expect((await collect(saver.list(cfg(copy)))).length).toBe(1);
      expect((await saver.getTuple(cfg(copy)))!.checkpoint.channel_values).toEqual({ a: 2, b: [1] });
    });
  });

  describe("crons", () => {
    it("put, get, search, count, all, remove", async () => {
      const owner = nextId("owner");
      const [a, b, c] = [nextId("cron"), nextId("cron"), nextId("cron")];
      await s.crons.put(cron(a, { assistant_id: owner, created_at: at(2), next_run_date: at(90) }));
      await s.crons.put(cron(b, { assistant_id: owner, created_at: at(1), enabled: false, thread_id: "t-x" }));
      await s.crons.put(cron(c, { assistant_id: owner, created_at: at(3), next_run_date: at(30), metadata: { m: 1 } }));
      expect(await s.crons.get(a)).toMatchObject({ cron_id: a, next_run_date: at(90) });
      const byNext = await s.crons.search({ assistant_id: owner, sortBy: "next_run_date", order: "asc", offset: 0, limit: 10 });
      expect(ids(byNext.items, "cron_id")).toEqual([c, b, a]);
      expect(byNext.total).toBe(3);
      expect(await s.crons.count({ assistant_id: owner, enabled: true })).toBe(2);
      expect(await s.crons.count({ assistant_id: owner, thread_id: "t-x" })).toBe(1);
      expect(await s.crons.count({ assistant_id: owner, metadata: { m: 1 } })).toBe(1);
      expect(ids(await s.crons.all(), "cron_id")).toEqual(expect.arrayContaining([a, b, c]));
      expect(await s.crons.remove(b)).toBe(true);
      expect(await s.crons.remove(b)).toBe(false);
      expect(await s.crons.get(b)).toBeUndefined();
    });

    it("update applies the change to the committed record: concurrent updates all land", async () => {
      const id = nextId("cron");
      await s.crons.put(cron(id, { payload: { n: 0 } }));
      await Promise.all(Array.from({ length: 15 }, () => s.crons.update(id, (cur) => ({ ...cur, payload: { n: (cur.payload.n as number) + 1 } }))));
      expect((await s.crons.get(id))!.payload).toEqual({ n: 15 });
      // undefined from change keeps the record; a missing cron is undefined
      const kept = await s.crons.update(id, () => undefined);
      expect(kept!.payload).toEqual({ n: 15 });
      expect(await s.crons.update(nextId("cron"), (cur) => cur)).toBeUndefined();
      // a tick that persists next_run_date after a concurrent remove does not bring the cron back
      await s.crons.remove(id);
      expect(await s.crons.update(id, (cur) => ({ ...cur, next_run_date: at(999) }))).toBeUndefined();
      expect(await s.crons.get(id)).toBeUndefined();
    });
  });

  describe("store", () => {
    it("batch: reads see the state before the batch's writes, the last put of an item wins, results in key order", async () => {
      const store = await s.store.open({});
      const ns = [nextId("ns"), "docs"];
      await store.write([
        { namespace: ns, key: "b", value: { n: 1 } },
        { namespace: ns, key: "a", value: { n: 2, tag: "x" } },
      ]);
      const [before, , , after] = await store.batch([
        { namespace: ns, key: "a" },
        { namespace: ns, key: "a", value: { n: 3 } },
        { namespace: ns, key: "a", value: { n: 4 } },
        { namespacePrefix: [ns[0]], limit: 10, offset: 0 },
      ]);
      expect(before).toMatchObject({ key: "a", value: { n: 2, tag: "x" } });
      expect((after as { key: string }[]).map((i) => i.key)).toEqual(["a", "b"]);
      const a = await store.item(ns, "a");
      expect(a).toMatchObject({ value: { n: 4 } });
      // an update keeps the item's created_at
      expect(a!.created_at <= a!.updated_at).toBe(true);
      expect((await store.searchItems({ namespacePrefix: [ns[0]], filter: { n: { $gte: 2 } }, offset: 0, limit: 10 })).map((i) => i.key)).toEqual(["a"]);
      expect((await store.scanItems({ namespacePrefix: [ns[0]], offset: 1, limit: 10 })).map((i) => i.key)).toEqual(["b"]);
      expect((await store.rank([a!], "anything")).map((i) => i.key)).toEqual(["a"]); // no index: unchanged
      await store.batch([{ namespace: ns, key: "b", value: null }]);
      expect(await store.item(ns, "b")).toBeNull();
      expect(await store.namespacesOf({ matchConditions: [{ matchType: "prefix", path: [ns[0]] }], limit: 10, offset: 0 })).toEqual([ns]);
      expect(await store.namespacesOf({ matchConditions: [{ matchType: "suffix", path: ["docs"] }], maxDepth: 1, limit: 100, offset: 0 })).toContainEqual([
        ns[0],
      ]);
      await expect(store.write([{ namespace: [], key: "x", value: { v: 1 } }])).rejects.toThrow(/Namespace/);
    });

    it("TTL: expired items are hidden from reads and swept; items with the default TTL or none stay", async () => {
      const store = await s.store.open({ ttl: { defaultTtlMinutes: 60, refreshOnRead: false } });
      const ns = [nextId("ns")];
      await store.write([{ namespace: ns, key: "short", value: { v: 1 } }], 0.001);
      await store.write([{ namespace: ns, key: "default", value: { v: 2 } }]);
      await store.write([{ namespace: ns, key: "none", value: { v: 3 } }], null);
      await new Promise((resolve) => setTimeout(resolve, 200)); // 0.001 minutes = 60 ms
      expect(await store.item(ns, "short")).toBeNull();
      expect((await store.searchItems({ namespacePrefix: ns, offset: 0, limit: 10 })).map((i) => i.key)).toEqual(["default", "none"]);
      expect(await s.store.sweepExpired(100)).toBe(1);
      expect(await s.store.sweepExpired(100)).toBe(0);
      // gone for good: rewriting it without a TTL starts a new item
      await store.write([{ namespace: ns, key: "short", value: { v: 5 } }], null);
      expect(await store.item(ns, "short")).toMatchObject({ value: { v: 5 } });
      expect(await s.store.sweepExpired(100)).toBe(0);
      expect((await store.searchItems({ namespacePrefix: ns, offset: 0, limit: 10 })).map((i) => i.key)).toEqual(["default", "none", "short"]);
    });
  });
});
