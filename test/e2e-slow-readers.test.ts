// A stream reader that stops reading while a run streams a lot (issue 24.4): the server stops
// writing to it, keeps a bounded backlog for it and then drops it, while another reader of the same
// stream and the run itself complete, and the server's memory stays far below the run's output.
import { readFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO } from "./helpers/server.ts";
import { useServer } from "./helpers/suite.ts";
import { waitUntil } from "./helpers/wait.ts";

const fx = useServer({ config: join(REPO, "test/fixtures/graphs/flood.json") });

// 96 MiB of custom events at most ~32 MiB/s: the reader that keeps up stays within its 8 MiB
// backlog even when this test process stalls for a while
const EVENTS = 1536;
const SIZE = 64 * 1024;
const PAUSE_MS = 2;
const OUTPUT = EVENTS * SIZE;

function rssBytes(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) * 1024 : 0;
}

describe("a reader that stops reading", () => {
  it("is dropped after a bounded backlog; the other reader and the run complete; memory stays bounded", { timeout: 180_000 }, async () => {
    const pid = fx.server.proc.pid!;
    const t = await fx.client.threads.create();
    const path = `/threads/${t.thread_id}/stream?stream_mode=run_modes&stream_mode=lifecycle`;

    // the stalled reader: a raw socket that reads the response head, then nothing more
    const { port } = new URL(fx.server.url);
    const stalled = connect(Number(port), "127.0.0.1");
    let stalledBytes = 0;
    let stalledHead = "";
    let stalledClosed = false;
    stalled.on("data", (d: Buffer) => {
      stalledBytes += d.length;
      if (stalledHead.length < 1000) stalledHead += d.toString("latin1");
    });
    stalled.on("close", () => (stalledClosed = true));
    stalled.on("error", () => undefined);
    stalled.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
    await waitUntil(() => stalledHead.includes(":\n\n"), { what: "the stalled reader's stream to open" });
    stalled.pause();

    // the reader that keeps up: counts bytes, watches for the run's end
    const res = await fetch(fx.server.url + path);
    const reader = res.body!.getReader();
    let readerBytes = 0;
    let tail = "";
    const readerDone = (async () => {
      for (;;) {
        const r = await reader.read();
        if (r.done) return;
        readerBytes += r.value.byteLength;
        tail = (tail + Buffer.from(r.value.buffer, r.value.byteOffset, r.value.byteLength).toString("latin1", Math.max(0, r.value.byteLength - 4096))).slice(
          -4096,
        );
        if (/event: run_end\n/.test(tail)) return reader.cancel();
      }
    })();

    const baseline = rssBytes(pid);
    let peak = baseline;
    const sampler = setInterval(() => (peak = Math.max(peak, rssBytes(pid))), 25);
    try {
      const run = await fx.client.runs.create(t.thread_id, "flood", {
        input: { messages: [] },
        streamMode: ["custom"],
        config: { configurable: { events: EVENTS, size: SIZE, pause_ms: PAUSE_MS } },
      });
      await readerDone;
      expect(readerBytes).toBeGreaterThan(OUTPUT);
      expect(tail).toMatch(/"status":"success"/);
      expect((await fx.client.runs.get(t.thread_id, run.run_id)).status).toBe("success");
    } finally {
      clearInterval(sampler);
    }
    // the stalled reader was dropped: reading now, it finds its stream cut short
    stalled.resume();
    await waitUntil(() => stalledClosed, { timeoutMs: 30_000, what: "the stalled reader's connection to be closed by the server" });
    expect(stalledBytes).toBeLessThan(OUTPUT / 4);
    // what the server held for it stayed far below the run's output
    expect(peak - baseline).toBeLessThan(OUTPUT / 2);
  });
});
