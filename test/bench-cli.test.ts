// The bench CLI end to end against a spawned Troupe server: it runs the chosen scenarios, prints
// its table and writes a JSON report with non-zero throughput and no errors.
import { describe, expect, it } from "vitest";
import { execFile } from "node:child_process";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { REPO } from "./helpers/server.ts";
import { useServer } from "./helpers/suite.ts";

const run = promisify(execFile);
const fx = useServer({ workers: 1 });

describe("bench CLI", () => {
  it("grows threads and store items in the scale scenario and measures each size", async () => {
    const out = join(mkdtempSync(join(tmpdir(), "troupe-bench-")), "r.json");
    const args = [
      "--url",
      fx.server.url,
      "--only",
      "scale",
      "--scale-threads",
      "1200",
      "--scale-samples",
      "5",
      "--scale-wait-runs",
      "2",
      "--duration",
      "0.5",
      "--scale-data-dir",
      fx.server.dataDir,
      "--out",
      out,
    ];
    await run(process.execPath, [join(REPO, "bin/troupe-bench.js"), ...args], { cwd: REPO, timeout: 120_000 });
    const report = JSON.parse(readFileSync(out, "utf8")) as {
      scenarios: { name: string; metrics: { metric: string; value: unknown }[]; errors: { count: number } }[];
    };
    const [scale] = report.scenarios;
    expect(scale.name).toBe("scale");
    expect(scale.errors.count).toBe(0);
    const value = (m: string) => Number(scale.metrics.find((x) => x.metric === m)?.value);
    // first in this file: the server has no threads yet, so the sizes are 1k and 1200
    for (const at of ["@1k", "@1200"]) {
      for (const m of [
        "create rate",
        "put rate",
        "search p50",
        "count p50",
        "count-all p50",
        "newest p50",
        "get p50",
        "ok-busy p99",
        "wait p50",
        "store p50",
        "store-wide p50",
        "data dir",
      ]) {
        expect(value(`${at} ${m}`), `${at} ${m}`).toBeGreaterThan(0);
      }
    }
  }, 150_000);

  it("measures /ok, thread creation and runs/wait and writes JSON", async () => {
    const out = join(mkdtempSync(join(tmpdir(), "troupe-bench-")), "r.json");
    const { stdout } = await run(
      process.execPath,
      [join(REPO, "bin/troupe-bench.js"), "--url", fx.server.url, "--only", "ok,thread-create,wait-c1", "--duration", "1", "--out", out],
      { cwd: REPO, timeout: 120_000 },
    );
    expect(stdout).toMatch(/thread-create\s+throughput/);
    const report = JSON.parse(readFileSync(out, "utf8")) as {
      scenarios: { name: string; metrics: { metric: string; value: unknown }[]; errors: { count: number } }[];
    };
    expect(report.scenarios.map((s) => s.name)).toEqual(["ok", "thread-create", "wait-c1"]);
    for (const s of report.scenarios) {
      expect(Number(s.metrics.find((m) => m.metric === "throughput")?.value)).toBeGreaterThan(0);
      expect(s.errors.count).toBe(0);
    }
  }, 150_000);

  it("joins running runs' streams (stream-join) and times their first event", async () => {
    const out = join(mkdtempSync(join(tmpdir(), "troupe-bench-")), "r.json");
    await run(process.execPath, [join(REPO, "bin/troupe-bench.js"), "--url", fx.server.url, "--only", "stream-join", "--stream-runs", "4", "--out", out], {
      cwd: REPO,
      timeout: 120_000,
    });
    const report = JSON.parse(readFileSync(out, "utf8")) as {
      scenarios: { name: string; metrics: { metric: string; value: unknown }[]; errors: { count: number } }[];
    };
    const [scenario] = report.scenarios;
    expect(scenario.name).toBe("stream-join");
    expect(scenario.errors.count).toBe(0);
    expect(scenario.metrics.find((m) => m.metric === "completed")?.value).toBe(4);
    expect(Number(scenario.metrics.find((m) => m.metric === "ttfe_p50")?.value)).toBeGreaterThan(0);
  }, 150_000);

  it("spreads the load round-robin over several --url servers (comma-separated or repeated)", async () => {
    // three plain HTTP servers that answer /ok and count what they got
    const counts = [0, 0, 0];
    const servers: Server[] = counts.map((_, i) =>
      createServer((req, res) => {
        if (req.url === "/ok") counts[i]++;
        res.statusCode = req.url === "/ok" ? 200 : 404;
        res.end(req.url === "/ok" ? '{"ok":true}' : '{"detail":"not found"}');
      }),
    );
    await Promise.all(servers.map((s) => new Promise<void>((r) => s.listen(0, "127.0.0.1", r))));
    const urls = servers.map((s) => `http://127.0.0.1:${(s.address() as AddressInfo).port}`);
    try {
      for (const urlArgs of [
        ["--url", `${urls[0]},${urls[1]}`, "--url", urls[2]],
        ["--url", urls.join(",")],
      ]) {
        counts.fill(0);
        const out = join(mkdtempSync(join(tmpdir(), "troupe-bench-")), "r.json");
        const { stdout } = await run(
          process.execPath,
          [join(REPO, "bin/troupe-bench.js"), ...urlArgs, "--only", "ok", "--duration", "0.5", "--warmup", "0.1", "--out", out],
          { cwd: REPO, timeout: 120_000 },
        );
        expect(stdout).toMatch(/ok\s+throughput/);
        const report = JSON.parse(readFileSync(out, "utf8")) as { server_urls: string[]; scenarios: { errors: { count: number } }[] };
        expect(report.server_urls).toEqual(urls.map((u) => `${u}/`));
        expect(report.scenarios[0].errors.count).toBe(0);
        // each request goes to the next server: the shares differ by a few requests at most
        const total = counts.reduce((a, b) => a + b, 0);
        expect(total).toBeGreaterThan(30);
        for (const c of counts) expect(Math.abs(c - total / 3), `${counts.join(" / ")}`).toBeLessThanOrEqual(total * 0.05 + 3);
      }
    } finally {
      for (const s of servers) s.close();
    }
  }, 150_000);

  it("prices the graph in-process (floor) with every row measured", async () => {
    const { stdout } = await run(process.execPath, [join(REPO, "bin/troupe-floor.js"), "--graph", "examples/echo.ts:graph", "--runs", "20", "--long", "20"], {
      cwd: REPO,
      timeout: 120_000,
    });
    const rows = stdout
      .split("\n")
      .slice(1)
      .filter((l) => l.trim() !== "");
    expect(rows).toHaveLength(6);
    for (const row of rows) {
      const figures = (row.match(/\s{2}([\d., ]+)$/)?.[1] ?? "").split(",").map(Number);
      expect(figures.length, row).toBeGreaterThan(0);
      for (const f of figures) expect(f, row).toBeGreaterThan(0);
    }
  }, 150_000);
});
