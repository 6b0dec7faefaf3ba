// The idle collector: one full GC after this thread was busy and then went idle, none otherwise.
import { describe, expect, it } from "vitest";
import { startIdleGc } from "../src/util/idle-gc.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const busyFor = (ms: number) => {
  const end = performance.now() + ms;
  while (performance.now() < end) { /* spin: event-loop utilisation near 1 */ }
};

describe("idle GC", () => {
  it("collects once after a busy period followed by idle samples, and not while idle only", async () => {
    const collected: number[] = [];
    const stop = startIdleGc({ intervalMs: 50, idleSamples: 2, idleBelow: 0.05, minBusyMs: 100 }, (busy) => collected.push(busy));
    try {
      await sleep(300); // idle from the start: nothing to give back
      expect(collected).toEqual([]);
      for (let i = 0; i < 4; i++) {
        busyFor(60);
        await sleep(1);
      }
      await sleep(400);
      expect(collected).toHaveLength(1);
      expect(collected[0]).toBeGreaterThanOrEqual(100);
      await sleep(300); // still idle, no new work: no second collection
      expect(collected).toHaveLength(1);
    } finally {
      stop();
    }
  });
});
