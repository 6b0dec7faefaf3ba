// The HTTP thread's cache of the assistants runs are created with (PostgreSQL): bounded by count
// (least recently used first) and age, and never keeping a read that a write overlapped.
import { describe, expect, it } from "vitest";
import { MAX_AGE_MS, MAX_ENTRIES, RunAssistantCache } from "../../src/storage/postgres/assistant-cache.ts";
import { assistantRecord } from "../helpers/records.ts";

const record = (id: string) => assistantRecord(id);

function cacheAt(): { cache: RunAssistantCache; advance(ms: number): void } {
  let now = 0;
  return { cache: new RunAssistantCache(() => now), advance: (ms) => void (now += ms) };
}

const read = (cache: RunAssistantCache, id: string, stamp = "1") => cache.keep(id, { record: record(id), stamp }, cache.readStarts());

describe("RunAssistantCache", () => {
  it("keeps what a read found, for MAX_AGE_MS; none is not kept", () => {
    const { cache, advance } = cacheAt();
    read(cache, "a", "7");
    expect(cache.get("a")).toMatchObject({ stamp: "7", record: { assistant_id: "a" } });
    cache.keep("b", undefined, cache.readStarts());
    expect(cache.get("b")).toBeUndefined();
    advance(MAX_AGE_MS + 1);
    expect(cache.get("a")).toBeUndefined();
  });

  it("drops the least recently used past MAX_ENTRIES", () => {
    const { cache } = cacheAt();
    for (let i = 0; i < MAX_ENTRIES; i++) read(cache, `a${i}`);
    expect(cache.get("a0")).toBeDefined(); // used: now the most recent
    read(cache, "new");
    expect(cache.get("a0")).toBeDefined();
    expect(cache.get("a1")).toBeUndefined();
    expect(cache.get("new")).toBeDefined();
  });

  it("a write drops the entry, and a read that started before it is not kept; one after it is", () => {
    const { cache } = cacheAt();
    read(cache, "a");
    const during = cache.readStarts();
    cache.forget("a");
    expect(cache.get("a")).toBeUndefined();
    cache.keep("a", { record: record("a"), stamp: "old" }, during);
    expect(cache.get("a")).toBeUndefined();
    cache.keep("b", { record: record("b"), stamp: "2" }, during); // another assistant's read: kept
    expect(cache.get("b")?.stamp).toBe("2");
    read(cache, "a", "new");
    expect(cache.get("a")?.stamp).toBe("new");
  });

  it("clear drops every entry and every read in flight", () => {
    const { cache } = cacheAt();
    read(cache, "a");
    const during = cache.readStarts();
    cache.clear();
    expect(cache.get("a")).toBeUndefined();
    cache.keep("b", { record: record("b"), stamp: "1" }, during);
    expect(cache.get("b")).toBeUndefined();
    read(cache, "b");
    expect(cache.get("b")).toBeDefined();
  });
});
