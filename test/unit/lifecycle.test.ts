// Domain rules of the runtime, tested directly (they are also exercised end to end).
import { describe, expect, it, vi } from "vitest";
import {
  matchesFilter,
  mergeConfigs,
  mergeContexts,
  threadConfigAfter,
  multitaskDecision,
  threadStatusAfterRun,
  REJECT_MESSAGE,
  isFinal,
  MAX_ATTEMPTS,
  outcomeAfterStop,
  recoveryPlan,
  stopActionOf,
  stopToRecord,
} from "../../src/domain/lifecycle.ts";
import { TroupeError } from "../../src/errors.ts";
import { RunHub } from "../../src/hub/run-hub.ts";
import { EventBuffer } from "../../src/bridge/event-buffer.ts";
import { jsonBytes, jsonText } from "../../src/bridge/json-segments.ts";
import { shardOf } from "../../src/bridge/sharding.ts";
import { defaultAssistantId, isUuid, uuid7 } from "../../src/util/ids.ts";

describe("thread status after a run", () => {
  it("follows the reference rules", () => {
    expect(threadStatusAfterRun({ outcome: "success", hasNext: false, queued: 0 })).toBe("idle");
    expect(threadStatusAfterRun({ outcome: "success", hasNext: true, queued: 0 })).toBe("interrupted");
    expect(threadStatusAfterRun({ outcome: "error", hasNext: true, queued: 0 })).toBe("error");
    expect(threadStatusAfterRun({ outcome: "interrupted", hasNext: true, queued: 0 })).toBe("idle");
    expect(threadStatusAfterRun({ outcome: "error", hasNext: false, queued: 2 })).toBe("busy");
  });
});

describe("stops answered 2xx (cancel, multitask interrupt/rollback)", () => {
  it("are read from the run's cancel_reason", () => {
    expect(stopActionOf({})).toBeUndefined();
    expect(stopActionOf({ cancel_reason: null })).toBeUndefined();
    expect(stopActionOf({ cancel_reason: "interrupt" })).toBe("interrupt");
    expect(stopActionOf({ cancel_reason: "rollback" })).toBe("rollback");
  });

  it("record the first stop; a rollback upgrades an interrupt, nothing else adds anything", () => {
    expect(stopToRecord(undefined, "interrupt")).toBe("interrupt");
    expect(stopToRecord(undefined, "rollback")).toBe("rollback");
    expect(stopToRecord("interrupt", "rollback")).toBe("rollback");
    expect(stopToRecord("interrupt", "interrupt")).toBeUndefined();
    expect(stopToRecord("rollback", "interrupt")).toBeUndefined();
    expect(stopToRecord("rollback", "rollback")).toBeUndefined();
  });

  it("win over what the graph did after them: the run ends interrupted, a rollback also discards it", () => {
    const success = { status: "success" as const, rolledBack: false, lastValues: ["{}"] };
    const failed = { status: "error" as const, rolledBack: false, error: { error: "E", message: "m" } };
    expect(outcomeAfterStop(success, undefined)).toBe(success);
    expect(outcomeAfterStop(success, "interrupt")).toEqual({ status: "interrupted", rolledBack: false, lastValues: ["{}"] });
    expect(outcomeAfterStop(success, "rollback")).toEqual({ status: "interrupted", rolledBack: true, lastValues: ["{}"] });
    expect(outcomeAfterStop(failed, "interrupt")).toEqual({ status: "interrupted", rolledBack: false });
    expect(outcomeAfterStop({ status: "interrupted", rolledBack: false }, "rollback")).toEqual({ status: "interrupted", rolledBack: true });
  });

  it("are carried out by recovery, never resumed", () => {
    expect(recoveryPlan({ status: "running", attempt: 1, cancel_reason: "interrupt" })).toBe("stop");
    expect(recoveryPlan({ status: "running", attempt: MAX_ATTEMPTS, cancel_reason: "rollback" })).toBe("stop");
    expect(recoveryPlan({ status: "pending", attempt: 0, cancel_reason: "interrupt" })).toBe("stop"); // stopped while it was being started
    expect(recoveryPlan({ status: "running", attempt: 1 })).toBe("resume");
    expect(recoveryPlan({ status: "running", attempt: MAX_ATTEMPTS })).toBe("give-up");
    expect(recoveryPlan({ status: "pending", attempt: 0 })).toBe("requeue");
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
    expect(["pending", "running", "success", "error", "interrupted", "timeout"].filter((s) => isFinal(s as never))).toEqual([
      "success",
      "error",
      "interrupted",
      "timeout",
    ]);
  });
});

describe("config merge and metadata filters", () => {
  it("merges configurable key by key, later wins", () => {
    expect(mergeConfigs({ tags: ["a"], configurable: { x: 1, y: 1 } }, undefined, { recursion_limit: 5, configurable: { y: 2 } })).toEqual({
      tags: ["a"],
      recursion_limit: 5,
      configurable: { x: 1, y: 2 },
    });
  });
  it("keeps no checkpoint address in a thread's config", () => {
    expect(
      threadConfigAfter(
        { configurable: { x: 1, checkpoint_id: "old" } },
        { tags: ["t"], configurable: { checkpoint_id: "c", checkpoint_ns: "", checkpoint_map: {}, y: 2 } },
      ),
    ).toEqual({ tags: ["t"], configurable: { x: 1, y: 2 } });
  });
  it("merges a run's context over its assistant's", () => {
    expect(mergeContexts({ model: "a", temperature: 0 }, { model: "b" })).toEqual({ model: "b", temperature: 0 });
    expect(mergeContexts({ model: "a" }, undefined)).toEqual({ model: "a" });
    expect(mergeContexts(undefined, { model: "b" })).toEqual({ model: "b" });
    expect(mergeContexts(undefined, undefined)).toBeUndefined();
    expect(mergeContexts(null, null)).toBeNull();
    expect(mergeContexts("fixed", { model: "b" })).toBe("fixed");
    expect(mergeContexts({ model: "a" }, "run text")).toBe("run text");
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
  it("never sends a thread stream a run's events after its run_end (a replay raced the run's end)", () => {
    const hub = new RunHub({ retentionMs: 1000 });
    const seen: string[] = [];
    hub.threads.subscribe("t", undefined, { modes: new Set(["run_modes", "lifecycle"]), onEvent: (e) => seen.push(e.event), onClose: () => undefined });
    hub.expect("r", "t", false);
    hub.started("r", "t", false, 1);
    hub.events("r", [{ id: 0, event: "metadata", data: "{}" }]);
    hub.finished({ runId: "r", threadId: "t", status: "success", output: jsonBytes(["{}"]), threadStatus: "idle" });
    // the worker's buffer, flushed by a run.observe that reached it after the run ended: kept for
    // the join that asked for it, not published to the thread stream
    hub.events("r", [{ id: 1, event: "values", data: "{}" }]);
    expect(seen).toEqual(["run_start", "metadata", "run_end"]);
    const replayed: number[] = [];
    hub.subscribe("r", "start", { onEvent: (e) => replayed.push(e.id), onDone: () => replayed.push(-1) });
    expect(replayed).toEqual([0, 1, -1]);
  });

  it("holds a run's events from its interrupt chunk on until the run's end (the thread is interrupted by then)", () => {
    const hub = new RunHub({ retentionMs: 1000 });
    const seen: string[] = [];
    hub.threads.subscribe("t", undefined, {
      modes: new Set(["run_modes", "lifecycle"]),
      onEvent: (e) => seen.push(`thread:${e.event}`),
      onClose: () => undefined,
    });
    hub.expect("r", "t", false);
    hub.started("r", "t", false, 1);
    hub.subscribe("r", "start", { onEvent: (e) => seen.push(`run:${e.event}`), onDone: () => seen.push("run:done") });
    hub.events("r", [
      { id: 0, event: "values", data: '{"messages":[]}' },
      { id: 1, event: "updates", data: '{"__interrupt__":[{"id":"i","value":1}]}' },
    ]);
    hub.events("r", [{ id: 2, event: "values", data: '{"__interrupt__":[{"id":"i","value":1}]}' }]);
    expect(seen).toEqual(["thread:run_start", "thread:values", "run:values"]);
    hub.finished({ runId: "r", threadId: "t", status: "success", output: jsonBytes(["{}"]), threadStatus: "interrupted" });
    expect(seen).toEqual([
      "thread:run_start",
      "thread:values",
      "run:values",
      "thread:updates",
      "thread:values",
      "run:updates",
      "run:values",
      "run:done",
      "thread:run_end",
    ]);
  });

  it("holds a run's run_end for thread streams while their fetch of its events is in flight", () => {
    const hub = new RunHub({ retentionMs: 1000 });
    const seen: string[] = [];
    hub.threads.subscribe("t", undefined, { modes: new Set(["run_modes", "lifecycle"]), onEvent: (e) => seen.push(e.event), onClose: () => undefined });
    hub.expect("r", "t", false);
    expect(hub.holdThreadEnd("r")).toBe(true);
    hub.started("r", "t", false, 1);
    hub.finished({ runId: "r", threadId: "t", status: "success", output: jsonBytes(["{}"]), threadStatus: "idle" });
    expect(seen).toEqual(["run_start"]);
    hub.events("r", [
      { id: 0, event: "metadata", data: "{}" },
      { id: 1, event: "values", data: "{}" },
    ]);
    hub.releaseThreadEnd("r");
    expect(seen).toEqual(["run_start", "metadata", "values", "run_end"]);
    expect(hub.holdThreadEnd("r")).toBe(false); // ended: nothing to hold
  });

  it("replays by Last-Event-ID for resumable runs and hands the buffer to the first reader otherwise", () => {
    const hub = new RunHub({ retentionMs: 1000 });
    hub.expect("r1", "t", true);
    hub.events(
      "r1",
      [0, 1, 2].map((id) => ({ id, event: "values", data: String(id) })),
    );
    const seen: number[] = [];
    hub.subscribe("r1", 0, { onEvent: (e) => seen.push(e.id), onDone: () => seen.push(-9) });
    expect(seen).toEqual([1, 2]);
    hub.finished({ runId: "r1", threadId: "t", status: "success", output: jsonBytes(["{}"]), threadStatus: "idle" });
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
    hub.finished({ runId: "r3", threadId: "t", status: "success", output: jsonBytes(['{"a":1}']), threadStatus: "idle" });
    expect(jsonText((await p).output!)).toBe('{"a":1}');
    expect(hub.doneOf("r3")?.status).toBe("success");
  });
});

describe("run hub retention", () => {
  it("forgets the oldest finished runs once their outputs pass the byte budget, never a live run", () => {
    const hub = new RunHub({ retentionMs: 60_000, maxRetainedBytes: 1000 });
    const finish = (runId: string, bytes: number) =>
      hub.finished({ runId, threadId: "t", status: "success", output: jsonBytes(["x".repeat(bytes)]), threadStatus: "idle" });
    const live = hub.waitFor("live");
    finish("a", 400);
    finish("b", 400);
    expect(hub.retainedSize).toBe(800);
    finish("c", 400); // 1200 > 1000: "a" goes
    expect(hub.doneOf("a")).toBeUndefined();
    expect(jsonText(hub.doneOf("b")!.output!)).toHaveLength(400);
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

describe("run hub accounting", () => {
  const ev = (id: number, bytes: number) => ({ id, event: "values", data: "x".repeat(bytes) });
  it("counts a finished run's buffered events, and stops counting a non-resumable run's once they are dropped", () => {
    vi.useFakeTimers();
    try {
      const hub = new RunHub({ retentionMs: 60_000 });
      hub.expect("res", "t", true);
      hub.events("res", [ev(0, 300), ev(1, 200)]);
      hub.finished({ runId: "res", threadId: "t", status: "success", output: jsonBytes(["y".repeat(100)]), threadStatus: "idle" });
      expect(hub.retainedSize).toBe(600);

      hub.expect("plain", "t", false);
      hub.events("plain", [ev(0, 1000)]);
      hub.finished({ runId: "plain", threadId: "t", status: "success", output: jsonBytes(["y".repeat(10)]), threadStatus: "idle" });
      expect(hub.retainedSize).toBe(1610);
      vi.advanceTimersByTime(5_000); // a non-resumable run's events go after 5 s, its output stays
      expect(hub.retainedSize).toBe(610);
      expect(jsonText(hub.doneOf("plain")!.output!)).toHaveLength(10);
      const replayed: number[] = [];
      hub.subscribe("res", "start", { onEvent: (e) => replayed.push(e.id), onDone: () => undefined });
      expect(replayed).toEqual([0, 1]); // resumable: the whole log stays for the retention
      vi.advanceTimersByTime(60_000);
      expect(hub.retainedSize).toBe(0);

      // a late join of a finished gated run: the worker's replayed buffer counts until it is dropped
      hub.expect("late", "t", false, false);
      hub.finished({ runId: "late", threadId: "t", status: "success", output: jsonBytes(["y".repeat(10)]), threadStatus: "idle" });
      expect(hub.retainedSize).toBe(10);
      hub.events("late", [ev(0, 400)]);
      expect(hub.retainedSize).toBe(410);
      vi.advanceTimersByTime(5_000);
      expect(hub.retainedSize).toBe(10);
    } finally {
      vi.useRealTimers();
    }
  });
  it("bounds a non-resumable run's log and keeps a resumable run's whole", () => {
    const hub = new RunHub({ retentionMs: 1000, maxBufferedBytes: 250 });
    hub.expect("plain", "t", false);
    hub.expect("res", "t", true);
    for (const run of ["plain", "res"]) hub.events(run, [ev(0, 100), ev(1, 100), ev(2, 100)]);
    const seen = (run: string) => {
      const ids: number[] = [];
      hub.subscribe(run, "start", { onEvent: (e) => ids.push(e.id), onDone: () => undefined });
      return ids;
    };
    expect(seen("plain")).toEqual([1, 2]);
    expect(seen("res")).toEqual([0, 1, 2]);
  });
  it("lists a thread's gated runs until they are observed, finish or are dropped", () => {
    const hub = new RunHub({ retentionMs: 1000 });
    hub.expect("a", "t", false, false);
    hub.expect("b", "t", false, false);
    hub.expect("c", "u", false, false);
    hub.expect("d", "t", false, true);
    expect(hub.gatedRunsOf("t").sort()).toEqual(["a", "b"]);
    hub.markObserved("a");
    expect(hub.gatedRunsOf("t")).toEqual(["b"]);
    hub.finished({ runId: "b", threadId: "t", status: "success", output: jsonBytes(["{}"]), threadStatus: "idle" });
    expect(hub.gatedRunsOf("t")).toEqual([]);
    expect(hub.isGated("b")).toBe(true); // a late join still asks the worker for the buffered events
    hub.drop("c");
    expect(hub.gatedRunsOf("u")).toEqual([]);
  });
});

describe("event buffer", () => {
  const e = (data: string) => ({ data });
  it("drops the oldest events past its byte or count bound, never the newest, and reports the change", () => {
    const byBytes = new EventBuffer<{ data: string }>(5);
    expect(byBytes.push(e("abc"))).toBe(3);
    expect(byBytes.push(e("de"))).toBe(2);
    expect(byBytes.push(e("f"))).toBe(-2); // "abc" goes: 6 > 5
    expect(byBytes.events.map((x) => x.data)).toEqual(["de", "f"]);
    expect(byBytes.push(e("0123456789"))).toBe(7); // alone over the bound, the newest stays
    expect(byBytes.events.map((x) => x.data)).toEqual(["0123456789"]);
    const byCount = new EventBuffer<{ data: string }>(Number.POSITIVE_INFINITY, 2);
    for (const d of ["a", "b", "c"]) byCount.push(e(d));
    expect(byCount.events.map((x) => x.data)).toEqual(["b", "c"]);
    byCount.bound(1);
    expect(byCount.events.map((x) => x.data)).toEqual(["c"]);
    expect(byCount.take().map((x) => x.data)).toEqual(["c"]);
    expect(byCount.bytes).toBe(0);
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
