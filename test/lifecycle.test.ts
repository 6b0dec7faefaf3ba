// Domain rules of the runtime, tested directly (they are also exercised end to end).
import { describe, expect, it } from "vitest";
import { matchesFilter, mergeConfigs, multitaskDecision, threadStatusAfterRun, REJECT_MESSAGE, isFinal } from "../src/actors/lifecycle.ts";
import { TroupeError } from "../src/errors.ts";
import { RunHub } from "../src/actors/run-hub.ts";
import { shardOf } from "../src/actors/sharding.ts";
import { defaultAssistantId, isUuid, uuid7 } from "../src/util/ids.ts";

describe("thread status after a run", () => {
  it("follows the reference rules", () => {
    expect(threadStatusAfterRun({ outcome: "success", hasNext: false, queued: 0 })).toBe("idle");
    expect(threadStatusAfterRun({ outcome: "success", hasNext: true, queued: 0 })).toBe("interrupted");
    expect(threadStatusAfterRun({ outcome: "error", hasNext: true, queued: 0 })).toBe("error");
    expect(threadStatusAfterRun({ outcome: "interrupted", hasNext: true, queued: 0 })).toBe("idle");
    expect(threadStatusAfterRun({ outcome: "error", hasNext: false, queued: 2 })).toBe("busy");
  });
});

describe("multitask strategies", () => {
  it("rejects only when something is in flight", () => {
    expect(multitaskDecision("reject", false)).toBe("none");
    let err: unknown;
    try {
      multitaskDecision("reject", true);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(TroupeError);
    expect((err as TroupeError).code).toBe("MULTITASK_REJECTED");
    expect((err as TroupeError).message).toBe(REJECT_MESSAGE);
    expect(multitaskDecision("interrupt", true)).toBe("cancel-interrupt");
    expect(multitaskDecision("rollback", true)).toBe("cancel-rollback");
    expect(multitaskDecision("enqueue", true)).toBe("none");
  });
  it("knows final statuses", () => {
    expect(["pending", "running", "success", "error", "interrupted", "timeout"].filter((s) => isFinal(s as never))).toEqual(["success", "error", "interrupted", "timeout"]);
  });
});

describe("config merge and metadata filters", () => {
  it("merges configurable key by key, later wins", () => {
    expect(mergeConfigs({ tags: ["a"], configurable: { x: 1, y: 1 } }, undefined, { recursion_limit: 5, configurable: { y: 2 } })).toEqual({ tags: ["a"], recursion_limit: 5, configurable: { x: 1, y: 2 } });
  });
  it("matches nested objects and arrays by value, never null", () => {
    expect(matchesFilter({ a: 1, b: { c: "x" } }, { a: 1, b: { c: "x", d: 2 }, e: 3 })).toBe(true);
    expect(matchesFilter({ a: [1, 2] }, { a: [1, 2] })).toBe(true);
    expect(matchesFilter({ a: null }, { a: null })).toBe(false);
    expect(matchesFilter({ a: 1 }, { a: 2 })).toBe(false);
    expect(matchesFilter({ a: 1 }, {})).toBe(false);
  });
});

describe("run hub", () => {
  it("replays by Last-Event-ID for resumable runs and hands the buffer to the first reader otherwise", () => {
    const hub = new RunHub({ retentionMs: 1000 });
    hub.expect("r1", "t", true);
    hub.events("r1", [0, 1, 2].map((id) => ({ id, event: "values", data: String(id) })));
    const seen: number[] = [];
    hub.subscribe("r1", 0, { onEvent: (e) => seen.push(e.id), onDone: () => seen.push(-9) });
    expect(seen).toEqual([1, 2]);
    hub.finished({ runId: "r1", threadId: "t", status: "success", output: "{}", threadStatus: "idle" });
    expect(seen).toEqual([1, 2, -9]);

    hub.expect("r2", "t", false);
    hub.events("r2", [{ id: 0, event: "metadata", data: "{}" }]);
    const first: number[] = [];
    const second: number[] = [];
    hub.subscribe("r2", "live", { onEvent: (e) => first.push(e.id), onDone: () => undefined });
    hub.subscribe("r2", "live", { onEvent: (e) => second.push(e.id), onDone: () => undefined });
    hub.events("r2", [{ id: 1, event: "values", data: "{}" }]);
    expect(first).toEqual([0, 1]);
    expect(second).toEqual([1]);
  });
  it("resolves waiters with the final output", async () => {
    const hub = new RunHub({ retentionMs: 1000 });
    const p = hub.waitFor("r3");
    hub.finished({ runId: "r3", threadId: "t", status: "success", output: '{"a":1}', threadStatus: "idle" });
    expect((await p).output).toBe('{"a":1}');
    expect(hub.doneOf("r3")?.status).toBe("success");
  });
});

describe("run hub retention", () => {
  it("forgets the oldest finished runs once their outputs pass the byte budget, never a live run", () => {
    const hub = new RunHub({ retentionMs: 60_000, maxRetainedBytes: 1000 });
    const finish = (runId: string, bytes: number) =>
      hub.finished({ runId, threadId: "t", status: "success", output: "x".repeat(bytes), threadStatus: "idle" });
    const live = hub.waitFor("live");
    finish("a", 400);
    finish("b", 400);
    expect(hub.retainedSize).toBe(800);
    finish("c", 400); // 1200 > 1000: "a" goes
    expect(hub.doneOf("a")).toBeUndefined();
    expect(hub.doneOf("b")?.output).toHaveLength(400);
    expect(hub.retainedSize).toBe(800);
    finish("huge", 5000); // the newest stays even alone over budget
    expect(hub.doneOf("huge")).toBeDefined();
    expect(hub.doneOf("b")).toBeUndefined();
    expect(hub.retainedSize).toBe(5000);
    hub.drop("huge");
    expect(hub.retainedSize).toBe(0);
    finish("live", 10);
    return expect(live).resolves.toMatchObject({ runId: "live" });
  });
});

describe("ids and sharding", () => {
  it("mints ordered v7 ids and the reference's default assistant ids", () => {
    const ids = Array.from({ length: 1000 }, () => uuid7());
    expect([...ids].sort()).toEqual(ids);
    expect(ids.every(isUuid)).toBe(true);
    expect(defaultAssistantId("agent")).toBe("fe096781-5601-53d2-b2f6-0d3403f7e9ca");
    expect(defaultAssistantId("slow")).toBe("cad1b5ad-d177-59d1-ab39-5e327188ed3a");
  });
  it("spreads threads over shards deterministically", () => {
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 4000; i++) counts[shardOf(uuid7(), 4)]++;
    for (const c of counts) expect(c).toBeGreaterThan(800);
    const id = uuid7();
    expect(shardOf(id, 4)).toBe(shardOf(id, 4));
  });
});
