// Merged writes on Postgres (write-chains.ts, MergeKind; checkpoint-sql.ts PUT_CHECKPOINTS,
// PUT_WRITES_MANY; runs.ts FINISH_MANY, CREATE_ON_THREAD_MANY; threads.ts threadCreateMany): the
// puts of a batch leave as one statement, its putWrites as another, a group's run ends, run creates
// and thread creates one statement per kind, in every other way as if each had been sent alone:
// the same rows (a put inheriting its parent's values from a put of the same statement), each write
// its own outcome (a statement that fails runs each write alone; a fence refusal, a changed
// assistant, a thread gone are its own write's), the order of every other write (a create never
// shares a statement with, nor moves ahead of, another write of its thread).
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { acquireLease } from "../../src/cluster/leases.ts";
import { TroupeError } from "../../src/errors.ts";
import { databaseStamp } from "../../src/cluster/time.ts";
import type { PostgresCheckpointSaver } from "../../src/storage/postgres/checkpointer.ts";
import type { PostgresStorage } from "../../src/storage/postgres/adapter.ts";
import { GROUPS_IN_FLIGHT } from "../../src/storage/postgres/write-chains.ts";
import { cfg, checkpoint, meta } from "../helpers/checkpoints.ts";
import { usePostgresNodePair } from "../helpers/postgres.ts";
import { assistantRecord, runRecord, threadRecord } from "../helpers/records.ts";

const nodes = usePostgresNodePair();
const timing = { ttlMs: 15_000, stamp: databaseStamp };

let serial = 0;
const nextId = (prefix: string): string => `${prefix}-${String(++serial).padStart(6, "0")}`;

/** Every statement sent on a connection of this process, by its prepared name (or its text's first word: BEGIN, COMMIT). */
const sent: string[] = [];
const clientQuery = pg.Client.prototype.query;
function countStatements(): void {
  sent.length = 0;
  (pg.Client.prototype as unknown as { query: (...a: unknown[]) => unknown }).query = function (this: pg.Client, ...a: unknown[]) {
    const c = a[0] as { name?: string; text?: string } | string;
    sent.push(typeof c === "string" ? c.split(/\s/)[0] : (c.name ?? c.text?.trim().split(/\s/)[0] ?? "?"));
    return (clientQuery as (...x: unknown[]) => unknown).apply(this, a);
  };
}
afterEach(() => {
  pg.Client.prototype.query = clientQuery;
});

async function saverOf(node: PostgresStorage): Promise<PostgresCheckpointSaver> {
  return (await node.checkpoints.open()).saver() as PostgresCheckpointSaver;
}

/** The thread's checkpoints as stored, the thread id left out (two threads written alike compare equal). */
async function stored(node: PostgresStorage, threadId: string): Promise<unknown[]> {
  const q = async (sql: string) => (await node.db.pool.query(sql, [threadId])).rows;
  return [
    await q("SELECT checkpoint_id, parent_checkpoint_id, blob_refs FROM checkpoints WHERE thread_id = $1 ORDER BY checkpoint_id"),
    await q("SELECT channel, version, owner, encode(blob, 'hex') AS blob FROM checkpoint_blobs WHERE thread_id = $1 ORDER BY owner, channel"),
    await q(
      "SELECT checkpoint_id, task_id, idx, channel, encode(blob, 'hex') AS blob FROM checkpoint_writes WHERE thread_id = $1 ORDER BY checkpoint_id, task_id, idx",
    ),
  ];
}

/**
 * A run's checkpoint writes as LangGraph issues them (put, putWrites, put, ...), each channel
 * changing in some steps only: c2 keeps c1's `bar`, c3 keeps c2's `foo`, c4 changes nothing (it
 * inherits `foo` through c3 from c2). `ids`: the checkpoint ids to use (the same for a twin thread).
 */
function runWrites(saver: PostgresCheckpointSaver, threadId: string, ids: string[], each: () => Promise<unknown> = async () => undefined): Promise<void> {
  const steps: { values: Record<string, unknown>; versions: Record<string, number>; changed: Record<string, number> }[] = [
    { values: { foo: "a", bar: "x" }, versions: { foo: 1, bar: 1 }, changed: { foo: 1, bar: 1 } },
    { values: { foo: "b", bar: "x" }, versions: { foo: 2, bar: 1 }, changed: { foo: 2 } },
    { values: { foo: "b", bar: "y" }, versions: { foo: 2, bar: 2 }, changed: { bar: 2 } },
    { values: { foo: "b", bar: "y" }, versions: { foo: 2, bar: 2 }, changed: {} },
  ];
  return (async () => {
    let parent: string | undefined;
    for (const [i, step] of steps.entries()) {
      const c = { ...checkpoint(step.values, step.versions), id: ids[i] };
      await saver.put(cfg(threadId, parent), c, meta(i), step.changed);
      await each();
      if (i < steps.length - 1) {
        await saver.putWrites(
          cfg(threadId, c.id),
          [
            ["foo", `w${i}`],
            ["bar", `v${i}`],
          ],
          `task-${i}`,
        );
        await each();
      }
      parent = c.id;
    }
  })();
}

/** Holds the threads' writes until released: what is issued meanwhile leaves as one batch. */
function holdWrites(saver: PostgresCheckpointSaver, ...threadIds: string[]): () => void {
  let release!: () => void;
  const until = new Promise<void>((resolve) => (release = resolve));
  for (const t of threadIds) saver.holdWritesUntil(t, until);
  return release;
}

const checkpointIds = (n: number): string[] => Array.from({ length: n }, () => checkpoint({}, {}).id);

describe("merged checkpoint writes (Postgres)", () => {
  it("a run's puts go as one statement and its putWrites as another, and store what each alone stores", async () => {
    const node = nodes.a;
    const saver = await saverOf(node);
    const [merged, alone] = [nextId("t"), nextId("t")];
    await node.threads.create(threadRecord(merged));
    await node.threads.create(threadRecord(alone));
    const ids = checkpointIds(4);
    // each write on its own (flushed before the next is issued)
    await runWrites(saver, alone, ids, () => saver.flush(alone));

    countStatements();
    const release = holdWrites(saver, merged);
    await runWrites(saver, merged, ids);
    const after = node.threads.save(threadRecord(merged, { metadata: { n: 2 } })); // the thread's next write: after them
    release();
    await Promise.all([after, saver.flush(merged)]);
    // (was: BEGIN, 4 puts, 3 putWrites, the save, COMMIT)
    expect(sent).toEqual(["BEGIN", "troupe_put_checkpoints", "troupe_put_writes_many", "troupe_thread_save", "COMMIT"]);

    expect(await stored(node, merged)).toEqual(await stored(node, alone));
    const latest = await saver.getTuple(cfg(merged));
    expect(latest?.checkpoint.id).toBe(ids[3]);
    expect(latest?.checkpoint.channel_values).toEqual({ foo: "b", bar: "y" });
    expect((await saver.getTuple(cfg(merged, ids[1])))?.pendingWrites).toEqual([
      ["task-1", "foo", "w1"],
      ["task-1", "bar", "v1"],
    ]);
    expect(await node.threads.get(merged)).toMatchObject({ metadata: { n: 2 } });
  });

  it("writes merged and nothing else leave as one statement, without BEGIN/COMMIT", async () => {
    const node = nodes.a;
    const saver = await saverOf(node);
    const t = nextId("t");
    await node.threads.create(threadRecord(t));
    countStatements();
    const release = holdWrites(saver, t);
    const ids = checkpointIds(2);
    await saver.put(cfg(t), { ...checkpoint({ foo: "a" }, { foo: 1 }), id: ids[0] }, meta(0), { foo: 1 });
    await saver.put(cfg(t, ids[0]), { ...checkpoint({ foo: "b" }, { foo: 2 }), id: ids[1] }, meta(1), { foo: 2 });
    release();
    await saver.flush(t);
    // (was: BEGIN, 2 puts, COMMIT)
    expect(sent).toEqual(["troupe_put_checkpoints"]);
    expect((await saver.getTuple(cfg(t)))?.checkpoint.channel_values).toEqual({ foo: "b" });
  });

  it("a write a statement may not hold twice (the same checkpoint put again, the same pending write) starts the next one", async () => {
    const node = nodes.a;
    const saver = await saverOf(node);
    const t = nextId("t");
    await node.threads.create(threadRecord(t));
    const [id] = checkpointIds(1);
    countStatements();
    const release = holdWrites(saver, t);
    await saver.put(cfg(t), { ...checkpoint({ foo: "a" }, { foo: 1 }), id }, meta(0), { foo: 1 });
    await saver.putWrites(cfg(t, id), [["foo", "first"]], "task");
    await saver.put(cfg(t), { ...checkpoint({ foo: "b" }, { foo: 2 }), id }, meta(1), { foo: 2 }); // replaces it
    await saver.putWrites(cfg(t, id), [["foo", "second"]], "task"); // a regular write: the first stays
    await saver.putWrites(cfg(t, id), [["__error__", "e1"]], "task");
    await saver.putWrites(cfg(t, id), [["__error__", "e2"]], "task"); // a special write: the last stays
    release();
    await saver.flush(t);
    // put, "first"; put again, "second" (the same row as "first"), e1; e2 (the same row as e1)
    expect(sent.filter((s) => s !== "BEGIN" && s !== "COMMIT")).toEqual([
      "troupe_put_checkpoint_or_fail",
      "troupe_put_writes",
      "troupe_put_checkpoint_or_fail",
      "troupe_put_writes_many",
      "troupe_put_writes",
    ]);
    const tuple = await saver.getTuple(cfg(t));
    expect(tuple?.checkpoint.channel_values).toEqual({ foo: "b" });
    expect(tuple?.pendingWrites).toEqual(
      expect.arrayContaining([
        ["task", "foo", "first"],
        ["task", "__error__", "e2"],
      ]),
    );
    expect(tuple?.pendingWrites).toHaveLength(2);
  });

  it("a write that fails in a merged statement fails alone: the others commit", async () => {
    const node = nodes.a;
    const saver = await saverOf(node);
    const t = nextId("t");
    await node.threads.create(threadRecord(t));
    const ids = checkpointIds(3);
    const release = holdWrites(saver, t);
    await saver.put(cfg(t), { ...checkpoint({ foo: "a" }, { foo: 1 }), id: ids[0] }, meta(0), { foo: 1 });
    await saver.putWrites(cfg(t, ids[0]), [["foo", "w"]], "task");
    // a namespace PostgreSQL cannot store (a NUL character): its put fails the merged statement
    const bad = { configurable: { thread_id: t, checkpoint_ns: "x\u0000y", checkpoint_id: ids[0] } };
    await saver.put(bad, { ...checkpoint({ foo: "b" }, { foo: 2 }), id: ids[1] }, meta(1), { foo: 2 });
    await saver.put(cfg(t, ids[0]), { ...checkpoint({ foo: "c" }, { foo: 3 }), id: ids[2] }, meta(2), { foo: 3 });
    countStatements();
    release();
    await expect(saver.flush(t)).rejects.toThrow();
    // the merged statement failed (the puts and the putWrites: one statement); then each write alone
    expect(sent).toEqual([
      "troupe_batch(put_checkpoints,put_writes_many)",
      "troupe_put_checkpoint",
      "troupe_put_writes",
      "troupe_put_checkpoint",
      "troupe_put_checkpoint",
    ]);
    const tuple = await saver.getTuple(cfg(t));
    expect(tuple?.checkpoint.id).toBe(ids[2]);
    expect(tuple?.checkpoint.channel_values).toEqual({ foo: "c" });
    expect((await saver.getTuple(cfg(t, ids[0])))?.pendingWrites).toEqual([["task", "foo", "w"]]);
  });

  it("fenced (cluster mode): a refused write in a merged statement writes nothing and rejects alone; the other thread's commit", async () => {
    const node = nodes.a;
    const saver = await saverOf(node);
    const [held, moved] = [nextId("t"), nextId("t")];
    const fillers = Array.from({ length: 6 }, () => nextId("t"));
    for (const t of [held, moved, ...fillers]) await node.threads.create(threadRecord(t));
    for (const t of [held, moved]) {
      const lease = await acquireLease(node.db, t, "node-a", timing);
      node.fences!.fence(t, lease!.epoch);
    }
    const refused: string[] = [];
    node.fences!.onRefused((t) => refused.push(t));
    // another node took `moved` over (its epoch moved on): this node's writes to it are refused
    await node.db.pool.query("UPDATE thread_leases SET epoch = epoch + 1, node_id = 'node-b' WHERE thread_id = $1", [moved]);
    const ids = checkpointIds(4);
    countStatements();
    const release = holdWrites(saver, held, moved);
    await saver.put(cfg(held), { ...checkpoint({ foo: "a" }, { foo: 1 }), id: ids[0] }, meta(0), { foo: 1 });
    await saver.put(cfg(moved), { ...checkpoint({ foo: "b" }, { foo: 1 }), id: ids[1] }, meta(0), { foo: 1 });
    await saver.putWrites(cfg(held, ids[0]), [["foo", "w"]], "task");
    await saver.putWrites(cfg(moved, ids[1]), [["foo", "w"]], "task");
    await saver.put(cfg(held, ids[0]), { ...checkpoint({ foo: "c" }, { foo: 2 }), id: ids[2] }, meta(1), { foo: 2 });
    await saver.put(cfg(moved, ids[1]), { ...checkpoint({ foo: "d" }, { foo: 2 }), id: ids[3] }, meta(1), { foo: 2 });
    // transactions in flight first, so that both threads' batches wait for them and leave as one group
    const busy = fillers.map((t) => node.threads.save(threadRecord(t, { status: "busy" })));
    release();
    await Promise.all(busy);
    await saver.flush(held);
    await expect(saver.flush(moved)).rejects.toThrow(/no longer holds its lease/);
    // the two threads' puts went in one statement, their putWrites in another
    expect(sent.filter((s) => s.startsWith("troupe_put"))).toEqual(["troupe_put_checkpoints", "troupe_put_writes_many"]);
    expect(refused.length).toBeGreaterThan(0);
    expect(new Set(refused)).toEqual(new Set([moved]));
    expect((await saver.getTuple(cfg(held)))?.checkpoint.channel_values).toEqual({ foo: "c" });
    expect((await saver.getTuple(cfg(held, ids[0])))?.pendingWrites).toEqual([["task", "foo", "w"]]);
    for (const table of ["checkpoints", "checkpoint_blobs", "checkpoint_writes"]) {
      const r = await node.db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE thread_id = $1`, [moved]);
      expect(r.rows[0].n).toBe(0);
    }
  });

  it("fenced: a put whose parent in the same statement was refused inherits nothing from it, as if sent after it", async () => {
    const node = nodes.a;
    const saver = await saverOf(node);
    const [merged, alone] = [nextId("t"), nextId("t")];
    const ids = checkpointIds(2);
    const write = async (t: string, each: () => Promise<unknown>, hold = false) => {
      await node.threads.create(threadRecord(t));
      const first = await acquireLease(node.db, t, "node-a", timing);
      node.fences!.fence(t, first!.epoch);
      // the lease moves on (another node's holding, here this one's again under a new epoch) between two puts
      await node.db.pool.query("UPDATE thread_leases SET epoch = epoch + 1 WHERE thread_id = $1", [t]);
      const release = hold ? holdWrites(saver, t) : () => undefined;
      await saver.put(cfg(t), { ...checkpoint({ foo: "a", bar: "x" }, { foo: 1, bar: 1 }), id: ids[0] }, meta(0), { foo: 1, bar: 1 });
      await each();
      node.fences!.fence(t, first!.epoch + 1);
      await saver.put(cfg(t, ids[0]), { ...checkpoint({ foo: "b", bar: "x" }, { foo: 2, bar: 1 }), id: ids[1] }, meta(1), { foo: 2 });
      await each();
      release();
    };
    await write(alone, () => saver.flush(alone).catch(() => undefined));
    countStatements();
    await write(merged, async () => undefined, true); // both puts queue, then leave together
    await expect(saver.flush(merged)).rejects.toThrow(/no longer holds its lease/);
    expect(sent.filter((s) => s.startsWith("troupe_put"))).toEqual(["troupe_put_checkpoints"]);
    expect(await stored(node, merged)).toEqual(await stored(node, alone));
    // c2 alone: its own `foo`, no `bar` (c1 was never written)
    const [rows] = (await stored(node, merged)) as [{ blob_refs: Record<string, unknown> }[]];
    expect(rows.map((r) => Object.keys(r.blob_refs).sort())).toEqual([["foo"]]);
  });

  it("run ends of several threads in a group go as one statement; a refused one writes nothing and rejects alone", async () => {
    const node = nodes.a;
    const saver = await saverOf(node);
    const [held, moved, unfenced] = [nextId("t"), nextId("t"), nextId("t")];
    const fillers = Array.from({ length: 6 }, () => nextId("t"));
    for (const t of [held, moved, unfenced, ...fillers]) await node.threads.create(threadRecord(t));
    const runs = new Map([held, moved, unfenced].map((t) => [t, runRecord(t, nextId("run"))]));
    for (const [t, r] of runs) await node.runs.create({ run: r, thread: threadRecord(t, { status: "busy" }) }).committed;
    for (const t of [held, moved]) {
      const lease = await acquireLease(node.db, t, "node-a", timing);
      node.fences!.fence(t, lease!.epoch);
    }
    await node.db.pool.query("UPDATE thread_leases SET epoch = epoch + 1, node_id = 'node-b' WHERE thread_id = $1", [moved]);
    countStatements();
    const release = holdWrites(saver, held, moved, unfenced);
    const ends = [held, moved, unfenced].map(
      (t) =>
        node.runs.finish({
          run: { ...runs.get(t)!, status: "success" },
          thread: threadRecord(t, { status: "idle", metadata: { ended: t } }),
          valuesJson: new TextEncoder().encode(JSON.stringify({ ended: t })),
        }).committed,
    );
    const busy = fillers.map((t) => node.threads.save(threadRecord(t, { status: "busy" })));
    release();
    const outcomes = await Promise.allSettled([...ends, ...busy]);
    expect(outcomes.slice(0, 3).map((o) => o.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect(String((outcomes[1] as PromiseRejectedResult).reason)).toMatch(/no longer holds its lease/);
    // (was one FINISH statement each)
    expect(sent.filter((s) => s.startsWith("troupe_run_finish"))).toEqual(["troupe_run_finish_many"]);
    for (const t of [held, unfenced]) {
      expect(await node.runs.get(t, runs.get(t)!.run_id)).toMatchObject({ status: "success" });
      expect(await node.threads.get(t)).toMatchObject({ status: "idle", metadata: { ended: t } });
    }
    expect(await node.runs.get(moved, runs.get(moved)!.run_id)).toMatchObject({ status: "pending" });
    expect(await node.threads.get(moved)).toMatchObject({ status: "busy", metadata: {} });
  });

  it("a run's last batch (its puts, putWrites and end) is one statement without BEGIN/COMMIT; if it fails, each write runs alone", async () => {
    const node = nodes.a;
    const saver = await saverOf(node);
    for (const failing of [false, true]) {
      const t = nextId("t");
      await node.threads.create(threadRecord(t));
      const run = runRecord(t, nextId("run"));
      await node.runs.create({ run, thread: threadRecord(t, { status: "busy" }) }).committed;
      const ids = checkpointIds(2);
      countStatements();
      const release = holdWrites(saver, t);
      await saver.put(cfg(t), { ...checkpoint({ foo: "a" }, { foo: 1 }), id: ids[0] }, meta(0), { foo: 1 });
      await saver.putWrites(cfg(t, ids[0]), [["foo", "w"]], "task");
      await saver.put(cfg(t, ids[0]), { ...checkpoint({ foo: "b" }, { foo: 2 }), id: ids[1] }, meta(1), { foo: 2 });
      // failing: a pending write PostgreSQL cannot store (a NUL in its task id) fails the statement
      if (failing) await saver.putWrites(cfg(t, ids[1]), [["foo", "x"]], "bad\u0000task");
      const end = node.runs.finish({ run: { ...run, status: "success" }, thread: threadRecord(t, { status: "idle" }), valuesJson: undefined }).committed;
      release();
      await end;
      if (failing) await expect(saver.flush(t)).rejects.toThrow();
      else await saver.flush(t);
      // (was: BEGIN, 2 puts, 1-2 putWrites, the end, COMMIT)
      const merged = "troupe_batch(put_checkpoints,put_writes_many,run_finish_many)";
      expect(sent).toEqual(
        failing ? [merged, "troupe_put_checkpoint", "troupe_put_writes", "troupe_put_checkpoint", "troupe_put_writes", "troupe_run_finish"] : [merged],
      );
      expect((await saver.getTuple(cfg(t)))?.checkpoint.channel_values).toEqual({ foo: "b" });
      expect((await saver.getTuple(cfg(t, ids[0])))?.pendingWrites).toEqual([["task", "foo", "w"]]);
      expect(await node.runs.get(t, run.run_id)).toMatchObject({ status: "success" });
      expect(await node.threads.get(t)).toMatchObject({ status: "idle" });
    }
  });
});

describe("merged creates (Postgres)", () => {
  const take = { nodeId: "node-a", ttlMs: 15_000, stamp: null };

  /** Writes of `n` other threads (GROUPS_IN_FLIGHT or more) to issue: what becomes ready while they are in flight leaves as one group. */
  async function inFlight(node: PostgresStorage, n = 6): Promise<() => Promise<unknown>> {
    const fillers = Array.from({ length: n }, () => nextId("t"));
    for (const t of fillers) await node.threads.create(threadRecord(t));
    return () => Promise.all(fillers.map((t) => node.threads.save(threadRecord(t, { status: "busy" }))));
  }

  it("thread creates of several threads in a group go as one statement per kind, each answering as alone", async () => {
    const node = nodes.a;
    const saver = await saverOf(node);
    const [a, b, existing, p1, p2, lone] = Array.from({ length: 6 }, () => nextId("t"));
    await node.threads.create(threadRecord(existing));
    const fill = await inFlight(node);
    const before = await node.threads.count({});
    countStatements();
    const release = holdWrites(saver, a, b, existing, p1, p2);
    const creates = [
      node.threads.createTaking!(threadRecord(a), take),
      node.threads.createTaking!(threadRecord(b), take),
      node.threads.createTaking!(threadRecord(existing, { metadata: { x: 1 } }), take),
      node.threads.create(threadRecord(p1), JSON.stringify({ v: 1 })),
      node.threads.create(threadRecord(p2)),
    ];
    const busy = fill();
    release();
    const [ta, tb, te, c1, c2] = await Promise.all(creates);
    await busy;
    // (was one statement per create)
    expect(sent.filter((s) => s.startsWith("troupe_thread_create"))).toEqual(["troupe_thread_create_taking_many", "troupe_thread_create_many"]);

    const taken = { epoch: expect.any(Number), expiresAt: expect.any(Date), noCheckpoints: true };
    expect(await node.threads.createTaking!(threadRecord(lone), take)).toEqual(taken); // alone, for the shape
    expect([ta, tb, te]).toEqual([taken, taken, "exists"]);
    expect([c1, c2]).toEqual([threadRecord(p1), threadRecord(p2)]);
    const leases = await node.db.pool.query<{ thread_id: string; epoch: string }>(
      "SELECT thread_id, epoch FROM thread_leases WHERE thread_id = ANY($1) ORDER BY thread_id",
      [[a, b, existing, p1, p2]],
    );
    expect(leases.rows.map((r) => [r.thread_id, Number(r.epoch)])).toEqual([
      [a, (ta as { epoch: number }).epoch],
      [b, (tb as { epoch: number }).epoch],
    ]);
    expect(await node.threads.get(existing)).toEqual(threadRecord(existing)); // left as it was
    expect(await node.threads.valuesJson(p1)).toBe(JSON.stringify({ v: 1 }));
    expect(await node.threads.valuesJson(p2)).toBeUndefined();
    expect(await node.threads.count({})).toBe(before + 5); // a, b, p1, p2 and the lone one: the row-count trigger counted each once
  });

  it("run creates on several threads in a group go as one statement, each answering as alone: an assistant changed, a thread gone", async () => {
    const node = nodes.a;
    const saver = await saverOf(node);
    const [t1, t2, t3, t4] = Array.from({ length: 4 }, () => nextId("t"));
    for (const t of [t1, t2, t3, t4]) await node.threads.create(threadRecord(t));
    // a cached assistant's check (forRun's second answer), and one of a version no longer current
    const assistant = assistantRecord(nextId("asst"));
    await node.assistants.create(assistant);
    await node.assistants.forRun(assistant.assistant_id, false);
    const current = (await node.assistants.forRun(assistant.assistant_id, false))!.check!;
    expect(current).toBeDefined();
    const stale = { ...current, stamp: String(Number(current.stamp) + 1_000_000) };
    await node.db.pool.query("DELETE FROM threads WHERE thread_id = $1", [t4]); // behind the actor's back
    const runs = [t1, t2, t3, t4].map((t) => runRecord(t, nextId("run")));
    const fill = await inFlight(node);
    countStatements();
    const release = holdWrites(saver, t1, t2, t3, t4);
    const checks = [undefined, current, stale, undefined];
    const creates = runs.map(
      (run, i) =>
        node.runs.create({ run, thread: threadRecord(run.thread_id, { status: "busy" }), prev: threadRecord(run.thread_id), assistant: checks[i] }).committed,
    );
    const busy = fill();
    release();
    const outcomes = await Promise.allSettled(creates);
    await busy;
    // (was one statement per create)
    expect(sent.filter((s) => s.startsWith("troupe_run_create"))).toEqual(["troupe_run_create_on_thread_many"]);
    expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "fulfilled", "rejected", "rejected"]);
    const reason = (i: number) => (outcomes[i] as PromiseRejectedResult).reason as TroupeError;
    expect(reason(2).code).toBe("ASSISTANT_CHANGED");
    expect(reason(3).code).toBe("NOT_FOUND");
    for (const i of [0, 1]) {
      expect(await node.runs.get(runs[i].thread_id, runs[i].run_id)).toEqual(runs[i]);
      expect(await node.threads.get(runs[i].thread_id)).toMatchObject({ status: "busy" });
    }
    expect(await node.runs.get(t3, runs[2].run_id)).toBeUndefined();
    expect(await node.threads.get(t3)).toMatchObject({ status: "idle" });
    expect(await node.runs.get(t4, runs[3].run_id)).toBeUndefined();
    expect(await node.threads.get(t4)).toBeUndefined();
  });

  it("a create never shares a statement with another write of its thread, nor moves ahead of one", async () => {
    const node = nodes.a;
    const saver = await saverOf(node);
    const busy = (t: string) => threadRecord(t, { status: "busy" });

    // a thread's create, then its run's create: the run's sees the thread's row
    const t = nextId("t");
    const r1 = runRecord(t, nextId("run"));
    countStatements();
    let release = holdWrites(saver, t);
    const made = node.threads.createTaking!(threadRecord(t), take);
    const first = node.runs.create({ run: r1, thread: busy(t), prev: threadRecord(t) }).committed;
    release();
    await Promise.all([made, first]);
    expect(sent).toEqual(["BEGIN", "troupe_thread_create_taking", "troupe_run_create_on_thread", "COMMIT"]);
    expect(await node.runs.get(t, r1.run_id)).toEqual(r1);

    // a run's end, then the next run's create: the create sees the end
    const r2 = runRecord(t, nextId("run"));
    countStatements();
    release = holdWrites(saver, t);
    const end = node.runs.finish({ run: { ...r1, status: "success" }, thread: threadRecord(t), valuesJson: undefined }).committed;
    const second = node.runs.create({ run: r2, thread: busy(t), prev: threadRecord(t) }).committed;
    release();
    await Promise.all([end, second]);
    expect(sent).toEqual(["BEGIN", "troupe_run_finish", "troupe_run_create_on_thread", "COMMIT"]);
    expect(await node.runs.get(t, r1.run_id)).toMatchObject({ status: "success" });
    expect(await node.runs.get(t, r2.run_id)).toEqual(r2);
    expect(await node.threads.get(t)).toMatchObject({ status: "busy" });

    // in a group: another thread's run create first does not take this thread's create ahead of its run's end
    const [other, u] = [nextId("t"), nextId("t")];
    for (const id of [other, u]) await node.threads.create(threadRecord(id));
    const [ro, ru1, ru2] = [runRecord(other, nextId("run")), runRecord(u, nextId("run")), runRecord(u, nextId("run"))];
    await node.runs.create({ run: ru1, thread: busy(u), prev: threadRecord(u) }).committed;
    const fill = await inFlight(node);
    countStatements();
    release = holdWrites(saver, other, u);
    const writes = [
      node.runs.create({ run: ro, thread: busy(other), prev: threadRecord(other) }).committed,
      node.runs.finish({ run: { ...ru1, status: "success" }, thread: threadRecord(u), valuesJson: undefined }).committed,
      node.runs.create({ run: ru2, thread: busy(u), prev: threadRecord(u) }).committed,
    ];
    const filling = fill();
    release();
    await Promise.all([...writes, filling]);
    expect(sent.filter((s) => s.startsWith("troupe_run"))).toEqual(["troupe_run_create_on_thread", "troupe_run_finish", "troupe_run_create_on_thread"]);
    expect(await node.runs.get(u, ru1.run_id)).toMatchObject({ status: "success" });
    expect(await node.runs.get(u, ru2.run_id)).toEqual(ru2);
    expect(await node.threads.get(u)).toMatchObject({ status: "busy" });
    expect(await node.runs.get(other, ro.run_id)).toEqual(ro);
  });

  it("a group of mergeable writes only is one statement even when its kinds' names pass PostgreSQL's 63 bytes (named by a digest)", async () => {
    const node = nodes.a;
    const saver = await saverOf(node);
    const [a, b] = [nextId("t"), nextId("t")];
    for (const t of [a, b]) await node.threads.create(threadRecord(t));
    const runB = runRecord(b, nextId("run"));
    await node.runs.create({ run: runB, thread: threadRecord(b, { status: "busy" }) }).committed;
    const runA = runRecord(a, nextId("run"));
    const ids = checkpointIds(2);
    // exactly as many in flight as make the others wait: the group then holds a's and b's writes only
    const fill = await inFlight(node, GROUPS_IN_FLIGHT);
    countStatements();
    const release = holdWrites(saver, a, b);
    // a's run create; b's run's last batch (puts, putWrites, end): four kinds, every write mergeable
    const create = node.runs.create({ run: runA, thread: threadRecord(a, { status: "busy" }), prev: threadRecord(a) }).committed;
    await saver.put(cfg(b), { ...checkpoint({ foo: "a" }, { foo: 1 }), id: ids[0] }, meta(0), { foo: 1 });
    await saver.putWrites(cfg(b, ids[0]), [["foo", "w"]], "task");
    await saver.put(cfg(b, ids[0]), { ...checkpoint({ foo: "b" }, { foo: 2 }), id: ids[1] }, meta(1), { foo: 2 });
    const end = node.runs.finish({ run: { ...runB, status: "success" }, thread: threadRecord(b), valuesJson: undefined }).committed;
    const filling = fill();
    release();
    await Promise.all([create, end, filling, saver.flush(b)]);
    // "troupe_batch(put_checkpoints,put_writes_many,run_create_on_thread_many,run_finish_many)" would be cut to 63 bytes
    const batches = sent.filter((s) => s.startsWith("troupe_batch"));
    expect(batches).toEqual([expect.stringMatching(/^troupe_batch_[0-9a-f]{32}$/)]);
    expect(sent.filter((s) => /^troupe_(run|put)/.test(s))).toEqual([]);
    expect(await node.runs.get(a, runA.run_id)).toEqual(runA);
    expect(await node.threads.get(a)).toMatchObject({ status: "busy" });
    expect(await node.runs.get(b, runB.run_id)).toMatchObject({ status: "success" });
    expect((await saver.getTuple(cfg(b)))?.checkpoint.channel_values).toEqual({ foo: "b" });
  });
});
