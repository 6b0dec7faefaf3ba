// The LMDB adapter of the storage port (src/storage/lmdb/): what each family promises callers
// beyond the LMDB calls it wraps — conditional writes that say what they did, read-modify-writes
// that see the committed record, results that round-trip. Real LMDB in a temp dir.
import { describe, expect, it } from "vitest";
import { lmdbStoragePort } from "../../src/storage/lmdb/adapter.ts";
import type { AssistantRecord, CronRecord } from "../../src/storage/records.ts";
import { newCronRecord } from "../../src/crons/cron-record.ts";
import { useTempStorage } from "../helpers/storage.ts";

const T0 = "2026-01-01T00:00:00.000Z";
const assistant = (id: string, over: Partial<AssistantRecord> = {}): AssistantRecord => ({
  assistant_id: id, version: 1, graph_id: "g", config: {}, context: {}, created_at: T0, updated_at: T0,
  metadata: { owner: "a" }, name: "n", description: null, ...over,
});

describe("LMDB adapter: assistants", () => {
  const tmp = useTempStorage("troupe-lmdb-port-");

  it("creates once: a taken id answers 'exists' and writes nothing", async () => {
    const { assistants } = lmdbStoragePort(tmp.storage);
    expect(await assistants.create(assistant("a1"))).toMatchObject({ assistant_id: "a1", version: 1 });
    expect(await assistants.create(assistant("a1", { name: "other" }))).toBe("exists");
    expect((await assistants.get("a1"))?.name).toBe("n");
    expect(await assistants.versions("a1", { offset: 0, limit: 10 })).toHaveLength(1);
  });

  it("patches into version max+1, merging metadata; setLatest tells a missing version from a missing assistant", async () => {
    const { assistants } = lmdbStoragePort(tmp.storage);
    await assistants.create(assistant("a1"));
    const v2 = await assistants.patch("a1", { metadata: { tag: "x" }, name: "two" }, "2026-01-02T00:00:00.000Z");
    expect(v2).toMatchObject({ version: 2, name: "two", metadata: { owner: "a", tag: "x" }, updated_at: "2026-01-02T00:00:00.000Z" });
    const back = await assistants.setLatest("a1", 1, "2026-01-03T00:00:00.000Z");
    expect(back).toMatchObject({ version: 1, name: "n", metadata: { owner: "a" } });
    // the next patch still numbers after the highest version, not after the latest
    expect((await assistants.patch("a1", {}, "2026-01-04T00:00:00.000Z"))?.version).toBe(3);
    expect(await assistants.setLatest("a1", 9, T0)).toBe("no-version");
    expect(await assistants.setLatest("nope", 1, T0)).toBeUndefined();
    expect(await assistants.patch("nope", {}, T0)).toBeUndefined();
    expect((await assistants.versions("a1", { offset: 0, limit: 10 })).map((v) => v.version)).toEqual([3, 2, 1]);
  });

  it("deletes an assistant with its versions, and says when there was none; ensureDefaults keeps an edited default", async () => {
    const { assistants } = lmdbStoragePort(tmp.storage);
    await assistants.create(assistant("a1"));
    await assistants.patch("a1", {}, T0);
    expect(await assistants.delete("a1")).toBe(true);
    expect(await assistants.delete("a1")).toBe(false);
    expect(await assistants.versions("a1", { offset: 0, limit: 10 })).toEqual([]);
    await assistants.ensureDefaults([assistant("d1")]);
    await assistants.patch("d1", { name: "edited" }, T0);
    await assistants.ensureDefaults([assistant("d1"), assistant("d2")]);
    expect((await assistants.get("d1"))?.name).toBe("edited");
    expect((await assistants.search({ sortBy: "assistant_id", order: "asc", offset: 0, limit: 10 })).items.map((a) => a.assistant_id)).toEqual(["d1", "d2"]);
    expect(await assistants.count({ metadata: { owner: "a" } })).toBe(2);
  });
});

describe("LMDB adapter: crons", () => {
  const tmp = useTempStorage("troupe-lmdb-port-");
  const cron = (id: string): CronRecord => newCronRecord({ assistant_id: "a", schedule: "* * * * *" }, { cronId: id, assistantId: "a", threadId: null, userId: null });

  it("update applies the change to the committed record, keeps it on undefined, and answers undefined for a missing cron", async () => {
    const { crons } = lmdbStoragePort(tmp.storage);
    await crons.put(cron("c1"));
    const seen: (string | null)[] = [];
    const updated = await crons.update("c1", (cur) => {
      seen.push(cur.next_run_date);
      return { ...cur, next_run_date: "2030-01-01T00:00:00.000Z" };
    });
    expect(updated?.next_run_date).toBe("2030-01-01T00:00:00.000Z");
    expect(await crons.update("c1", () => undefined)).toMatchObject({ next_run_date: "2030-01-01T00:00:00.000Z" });
    expect(await crons.update("missing", (cur) => cur)).toBeUndefined();
    expect((await crons.all()).map((c) => c.cron_id)).toEqual(["c1"]);
    expect(await crons.remove("c1")).toBe(true);
    expect(await crons.remove("c1")).toBe(false);
    expect(await crons.get("c1")).toBeUndefined();
    expect(await crons.count({})).toBe(0);
  });
});
