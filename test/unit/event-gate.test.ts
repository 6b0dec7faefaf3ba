// RunEventGates: the worker-side buffer of events of runs nobody reads yet.
import { describe, expect, it } from "vitest";
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { RunEventGates, type ProducedRunEvent } from "../../src/actors/event-gate.ts";
import type { RunEvent } from "../../src/bridge/messages.ts";
import { deferredJsonText, toJsonText } from "../../src/actors/value-json.ts";

const ev = (id: number, data = "x"): RunEvent => ({ id, event: "values", data });

function setup(maxBufferedBytes = 1024, retainAfterDoneMs = 50, maxTotalBytes = 1 << 20) {
  const forwarded: [string, number[]][] = [];
  const sent: RunEvent[] = [];
  const gates = new RunEventGates(
    (runId, events) => {
      forwarded.push([runId, events.map((e) => e.id)]);
      sent.push(...events);
    },
    { maxBufferedBytes, retainAfterDoneMs, maxTotalBytes },
  );
  return { gates, forwarded, sent };
}

describe("RunEventGates", () => {
  it("forwards events of observed and unknown runs at once", () => {
    const { gates } = setup();
    gates.open("seen", true);
    expect(gates.accept("seen", ev(0))).toEqual(ev(0));
    expect(gates.accept("recovered-after-restart", ev(0))).toEqual(ev(0));
    expect(gates.size).toBe(0);
  });

  it("buffers an unobserved run until observe, which forwards the buffer and goes live", () => {
    const { gates, forwarded } = setup();
    gates.open("r", false);
    expect(gates.accept("r", ev(0))).toBeUndefined();
    expect(gates.accept("r", ev(1))).toBeUndefined();
    expect(forwarded).toEqual([]);
    expect(gates.observe("r", true)).toBe(true);
    expect(forwarded).toEqual([["r", [0, 1]]]);
    expect(gates.accept("r", ev(2))).toEqual(ev(2));
    expect(gates.observe("r", true)).toBe(false); // already observed: nothing sent twice
    expect(forwarded).toHaveLength(1);
  });

  it("drops the buffer when observed without replay (a thread stream joins live)", () => {
    const { gates, forwarded } = setup();
    gates.open("r", false);
    gates.accept("r", ev(0));
    expect(gates.observe("r", false)).toBe(true);
    expect(forwarded).toEqual([]);
    expect(gates.accept("r", ev(1))).toEqual(ev(1));
  });

  it("bounds the buffer by bytes, keeping the newest events and always the last one", () => {
    const { gates, forwarded } = setup(10);
    gates.open("r", false);
    for (let i = 0; i < 5; i++) gates.accept("r", ev(i, "abcd"));
    gates.accept("r", ev(5, "x".repeat(50)));
    gates.observe("r", true);
    expect(forwarded).toEqual([["r", [5]]]);
    gates.open("s", false);
    for (let i = 0; i < 5; i++) gates.accept("s", ev(i, "abcd"));
    gates.observe("s", true);
    expect(forwarded[1]).toEqual(["s", [3, 4]]);
  });

  it("drops finished runs' buffers first, oldest first, when all buffers pass the total budget", () => {
    const { gates, forwarded } = setup(100, 10_000, 100);
    for (const id of ["old", "newer", "live"]) gates.open(id, false);
    gates.accept("old", ev(0, "o".repeat(40)));
    gates.done("old");
    gates.accept("newer", ev(0, "n".repeat(40)));
    gates.done("newer");
    expect(gates.bufferedBytes).toBe(80);
    gates.accept("live", ev(0, "l".repeat(40))); // 120 > 100: "old" goes
    expect(gates.bufferedBytes).toBe(80);
    expect(gates.observe("old", true)).toBe(false);
    expect(gates.observe("newer", true)).toBe(true);
    expect(gates.observe("live", true)).toBe(true);
    expect(forwarded.map(([id]) => id)).toEqual(["newer", "live"]);
    expect(gates.bufferedBytes).toBe(0);
  });

  it("drops at once the buffer of a run nobody can join (stateless run ended, create refused)", () => {
    const { gates } = setup(1024, 60_000);
    gates.open("stateless", false);
    gates.accept("stateless", ev(0, "abc"));
    gates.done("stateless", false);
    gates.open("refused", false);
    gates.done("refused", false);
    expect(gates.size).toBe(0);
    expect(gates.bufferedBytes).toBe(0);
    expect(gates.observe("stateless", true)).toBe(false);
  });

  it("keeps a finished unobserved run's buffer for a late joiner, then forgets it", async () => {
    const { gates, forwarded } = setup(1024, 30);
    gates.open("late", false);
    gates.accept("late", ev(0));
    gates.done("late");
    expect(gates.observe("late", true)).toBe(true);
    expect(forwarded).toEqual([["late", [0]]]);
    expect(gates.size).toBe(0);
    gates.open("never", false);
    gates.accept("never", ev(0));
    gates.done("never");
    await new Promise((r) => setTimeout(r, 80));
    expect(gates.size).toBe(0);
    expect(gates.observe("never", true)).toBe(false);
    gates.open("seen", true);
    gates.done("seen");
    expect(gates.size).toBe(0);
  });

  it("renders deferred data only when the event is forwarded, and counts it by its estimate until then", () => {
    const { gates, forwarded, sent } = setup(100);
    let renders = 0;
    const deferred = (id: number, estimate: number): ProducedRunEvent => ({ id, event: "values", data: { estimate, render: () => `${++renders}` } });
    gates.open("r", false);
    expect(gates.accept("r", deferred(0, 60))).toBeUndefined();
    expect(gates.accept("r", deferred(1, 60))).toBeUndefined(); // 120 > 100: event 0 goes unrendered
    expect(gates.bufferedBytes).toBe(60);
    expect(renders).toBe(0);
    gates.observe("r", true);
    expect(forwarded).toEqual([["r", [1]]]);
    expect(sent).toEqual([{ id: 1, event: "values", data: "1" }]);
    expect(gates.accept("r", deferred(2, 60))).toEqual({ id: 2, event: "values", data: "2" }); // live: rendered at once
    gates.open("never-read", false);
    gates.accept("never-read", deferred(0, 10));
    gates.done("never-read", false);
    expect(renders).toBe(2);
  });

  it("forwards an error in place of deferred data that does not serialize", () => {
    const { gates, sent } = setup();
    gates.open("r", false);
    gates.accept("r", {
      id: 0,
      event: "values",
      data: {
        estimate: 10,
        render: () => {
          throw new TypeError("Converting circular structure to JSON");
        },
      },
    });
    gates.observe("r", true);
    expect(sent).toEqual([{ id: 0, event: "error", data: JSON.stringify({ error: "TypeError", message: "Converting circular structure to JSON" }) }]);
  });
});

describe("deferredJsonText", () => {
  it("renders what toJsonText renders for a long state as it was when the event was emitted", () => {
    const messages = Array.from({ length: 300 }, (_, i) =>
      i % 2 ? new AIMessage({ content: `a${i}`, id: `a${i}` }) : new HumanMessage({ content: `h${i}`, id: `h${i}` }),
    );
    const state: Record<string, unknown> = { messages, step: 1 };
    const expected = toJsonText(state);
    const deferred = deferredJsonText(state);
    if (typeof deferred === "string") throw new Error("a plain object's JSON should be deferred");
    expect(deferred.estimate).toBeGreaterThan(300 * 100);
    messages.push(new HumanMessage({ content: "later", id: "h2" })); // a list the state shares, appended to later
    messages[0] = new HumanMessage({ content: "replaced", id: "h1" });
    state.step = 2;
    expect(deferred.render()).toBe(expected);
  });

  it("serializes short states and anything but a plain object at once", () => {
    const list = [new HumanMessage({ content: "hi", id: "h1" })];
    expect(deferredJsonText({ messages: list })).toBe(toJsonText({ messages: list }));
    expect(deferredJsonText(list)).toBe(toJsonText(list));
    expect(deferredJsonText(null)).toBe("null");
  });
});
