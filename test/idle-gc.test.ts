// The idle collector: one full GC after this thread was busy and then went idle, none otherwise.
import { describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createIdleBoard, startIdleGc } from "../src/util/idle-gc.ts";
import { waitUntil } from "./helpers/wait.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const busyFor = (ms: number) => {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    /* spin: event-loop utilisation near 1 */
  }
};

const anonMb = () => Number(/RssAnon:\s+(\d+)/.exec(readFileSync("/proc/self/status", "utf8"))?.[1]) / 1024;

/** ~200 MB of 2 kB ArrayBuffers (malloc'd by Node), every 50th kept so the arena cannot shrink from its top. */
function fragmentedCHeap(): { dropped: Buffer[]; kept: Buffer[] } {
  const heap = { dropped: [] as Buffer[], kept: [] as Buffer[] };
  for (let i = 0; i < 100_000; i++) {
    const b = Buffer.allocUnsafeSlow(2_000).fill(1);
    (i % 50 === 0 ? heap.kept : heap.dropped).push(b);
  }
  return heap;
}

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
      await sleep(800); // two idle samples, then the C-heap trim delay (300 ms) before onCollect
      expect(collected).toHaveLength(1);
      expect(collected[0]).toBeGreaterThanOrEqual(100);
      await sleep(300); // still idle, no new work: no second collection
      expect(collected).toHaveLength(1);
    } finally {
      stop();
    }
  });
});

describe("idle GC and the C heap", () => {
  it("trims the C heap after its collection: freed malloc'd memory goes back to the OS", async () => {
    const heap = fragmentedCHeap();
    let collected = false;
    const stop = startIdleGc({ intervalMs: 50, idleSamples: 2, idleBelow: 0.05, minBusyMs: 100 }, () => (collected = true));
    try {
      heap.dropped = []; // garbage now; only a GC frees the buffers, only a trim gives their pages back
      for (let i = 0; i < 4; i++) {
        busyFor(60);
        await sleep(1);
      }
      const before = anonMb();
      let freed = 0;
      for (let waited = 0; waited < 4_000 && freed <= 100; waited += 100) {
        await sleep(100);
        freed = before - anonMb();
      }
      expect(collected).toBe(true);
      expect(freed).toBeGreaterThan(100);
      expect(heap.kept.every((b) => b[1_999] === 1)).toBe(true);
    } finally {
      stop();
    }
  });
});

describe("idle board (one server's threads)", () => {
  it("publishes this thread's utilisation, and collects only once no other thread is busy", async () => {
    const buffer = createIdleBoard(2);
    const board = new Int32Array(buffer);
    Atomics.store(board, 1, 500); // the other thread (slot 1): 50% busy
    const collected: number[] = [];
    const stop = startIdleGc({ intervalMs: 50, idleSamples: 2, idleBelow: 0.05, minBusyMs: 100, othersBusyFrom: 0.1, board: { buffer, slot: 0 } }, (busy) =>
      collected.push(busy),
    );
    try {
      for (let i = 0; i < 4; i++) {
        busyFor(60);
        await sleep(1);
      }
      expect(Atomics.load(board, 0)).toBeGreaterThanOrEqual(50); // its busy sample, in permille
      await sleep(600); // idle here for many samples, but the other thread works: no collection
      expect(collected).toEqual([]);
      expect(Atomics.load(board, 0)).toBeLessThan(50);
      Atomics.store(board, 1, 80); // the other thread goes quiet (8%: light traffic)
      // two idle samples, then the trim delay before onCollect (a loaded machine may lag: wait for it)
      await waitUntil(() => collected.length >= 1, { what: "a collection once the other thread is quiet" });
      expect(Atomics.load(board, 0)).toBeLessThan(50); // idle again after its collection
    } finally {
      stop();
    }
    expect(Atomics.load(board, 0)).toBe(0);
  });
});

describe("C-heap trim (native/memory.cc)", () => {
  it("is built by npm install and hands freed malloc'd memory back to the OS", async () => {
    const { nativeMemory, nativeMemoryError, trimCHeap } = await import("../src/util/native-memory.ts");
    expect(nativeMemoryError()).toBeUndefined();
    expect(nativeMemory()?.supported()).toBe(true); // glibc: CI and these machines
    (await import("node:v8")).setFlagsFromString("--expose-gc");
    const gc = (await import("node:vm")).runInNewContext("gc") as () => void;
    const heap = fragmentedCHeap();
    heap.dropped = [];
    // backing stores are freed by V8's array-buffer sweeper, off the main thread: on a loaded
    // machine it lags (one 200 ms wait left ~half of them unfreed, and the trim had less to give)
    for (let i = 0; i < 6; i++) {
      gc();
      await sleep(200);
    }
    const beforeTrim = anonMb();
    expect(trimCHeap()).toBe(true);
    const afterTrim = anonMb();
    expect(beforeTrim - afterTrim).toBeGreaterThan(100);
    expect(heap.kept.every((b) => b[1_999] === 1)).toBe(true); // live buffers untouched
  });
});

describe("heap reduction and data-file unmapping (native/memory.cc)", () => {
  it("reduceHeap shrinks this thread's V8 heap below what gc() leaves", async () => {
    const { reduceHeap } = await import("../src/util/native-memory.ts");
    (await import("node:v8")).setFlagsFromString("--expose-gc");
    const gc = (await import("node:vm")).runInNewContext("gc") as () => void;
    let garbage: { i: number; s: string }[] = [];
    for (let i = 0; i < 1_000_000; i++) garbage.push({ i, s: `x${i}` });
    expect(garbage.length).toBe(1_000_000);
    garbage = [];
    gc();
    const afterGc = process.memoryUsage().heapTotal;
    expect(reduceHeap()).toBe(true);
    expect(process.memoryUsage().heapTotal).toBeLessThan(afterGc);
  });

  it("releaseFileMapping drops the LMDB file's resident pages; reads still see every value", async () => {
    const { openStorage, dataFilePath } = await import("../src/storage/env.ts");
    const { releaseFileMapping } = await import("../src/util/native-memory.ts");
    const dir = mkdtempSync(join(tmpdir(), "troupe-unmap-"));
    const storage = openStorage(dir);
    try {
      const value = "v".repeat(3_000);
      await storage.root.transaction(() => {
        for (let i = 0; i < 10_000; i++) storage.threadValues.put(`t${i}`, `${i}:${value}`);
      });
      const file = realpathSync(dataFilePath(dir));
      const residentKb = () => {
        let kb = 0;
        let inFile = false;
        for (const line of readFileSync("/proc/self/smaps", "utf8").split("\n")) {
          if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) inFile = line.endsWith(` ${file}`);
          else if (inFile && line.startsWith("Rss:")) kb += Number(line.split(/\s+/)[1]);
        }
        return kb;
      };
      storage.root.resetReadTxn();
      for (let i = 0; i < 10_000; i++) storage.threadValues.get(`t${i}`); // reads map the pages
      expect(residentKb()).toBeGreaterThan(20_000);
      expect(releaseFileMapping(dataFilePath(dir))).toBeGreaterThan(0);
      expect(residentKb()).toBeLessThan(1_000);
      for (let i = 0; i < 10_000; i += 997) expect(storage.threadValues.get(`t${i}`)).toBe(`${i}:${value}`);
    } finally {
      await storage.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
