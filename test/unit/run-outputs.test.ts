// Which run outputs go with run.done and which stay in the worker until a join asks (run-outputs.ts).
import { describe, expect, it } from "vitest";
import { jsonBytes, jsonText } from "../../src/bridge/json-segments.ts";
import { RunOutputs } from "../../src/actors/run-outputs.ts";

const segments = (chars: number, tag = "x") => ['{"v":"', tag.repeat(chars), '"}'];

describe("run outputs", () => {
  it("posts small outputs and awaited ones with run.done, keeps large ones nobody awaits", () => {
    const outputs = new RunOutputs({ postBelowBytes: 100 });
    expect(jsonText(outputs.ended("small", { json: segments(10) })!)).toBe(`{"v":"${"x".repeat(10)}"}`);
    outputs.await("awaited");
    expect(outputs.ended("awaited", { json: segments(500) })?.byteLength).toBe(508);
    expect(outputs.ended("large", { json: segments(500) })).toBeUndefined();
    expect(outputs.size).toBe(1);
    // kept as segments, encoded when asked: multi-byte text comes back exact
    const text = "é ✓ \u2028 😀".repeat(20);
    expect(outputs.ended("utf8", { json: ['{"v":"', text, '"}'] })).toBeUndefined();
    expect(jsonText(outputs.bytesOf("utf8")!)).toBe(`{"v":"${text}"}`);
    expect(jsonText(outputs.bytesOf("large")!)).toBe(`{"v":"${"x".repeat(500)}"}`);
    expect(outputs.bytesOf("small")).toBeUndefined(); // posted, not kept
  });

  it("posts the bytes the actor encoded already instead of encoding again", () => {
    const outputs = new RunOutputs({ postBelowBytes: 100 });
    const bytes = jsonBytes(segments(10));
    expect(outputs.ended("r", { json: segments(10), bytes })).toBe(bytes);
    outputs.await("big");
    const big = jsonBytes(segments(500));
    expect(outputs.ended("big", { json: segments(500), bytes: big })).toBe(big);
  });

  it("forgets an awaited run whose create was refused: a later run with that id is not posted whole", () => {
    const outputs = new RunOutputs({ postBelowBytes: 100 });
    outputs.await("r");
    outputs.refused("r");
    expect(outputs.ended("r", { json: segments(500) })).toBeUndefined();
  });

  it("drops the oldest kept outputs past the byte budget, never the newest", () => {
    const outputs = new RunOutputs({ postBelowBytes: 10, maxBytes: 1_000 });
    outputs.ended("a", { json: segments(392) }); // 400 chars each
    outputs.ended("b", { json: segments(392) });
    expect(outputs.length).toBe(800);
    outputs.ended("c", { json: segments(392) });
    expect(outputs.bytesOf("a")).toBeUndefined();
    expect(outputs.bytesOf("b")).toBeDefined();
    expect(outputs.length).toBe(800);
    outputs.ended("huge", { json: segments(5_000) });
    expect(outputs.bytesOf("huge")).toBeDefined();
    expect(outputs.size).toBe(1);
  });

  it("drops kept outputs once they are older than the retention", () => {
    let now = 0;
    const outputs = new RunOutputs({ postBelowBytes: 10, maxAgeMs: 60_000 }, () => now);
    outputs.ended("old", { json: segments(100) });
    now = 30_000;
    outputs.ended("newer", { json: segments(100) });
    now = 60_000;
    expect(outputs.bytesOf("old")).toBeUndefined();
    expect(outputs.bytesOf("newer")).toBeDefined();
    now = 90_000;
    expect(outputs.bytesOf("newer")).toBeUndefined();
    expect(outputs.size).toBe(0);
    expect(outputs.length).toBe(0);
  });
});
