// rss: the server's resident memory at the end of the bench (and the peak seen while it ran).
import { ErrorTally } from "../error-tally.ts";
import { readRss, readRssParts } from "../proc-rss.ts";
import { metric } from "./metrics.ts";
import type { Scenario, ScenarioOutcome } from "./types.ts";

export const rssScenario: Scenario = {
  name: "rss",
  describe: (o) => (o.pid === null ? "server RSS (n/a: no --pid)" : `VmRSS of pid ${o.pid}${o.pidTree ? " and its descendants" : ""}`),
  async run(ctx): Promise<ScenarioOutcome> {
    const o = ctx.options;
    const errors = new ErrorTally();
    if (o.pid === null) return { metrics: [metric("rss", "n/a", "MB")], errors: errors.report(), notes: ["pass --pid to measure"] };
    const end = readRss(o.pid, o.pidTree);
    if (end === null) {
      errors.add("no such process", `pid ${o.pid}`);
      return { metrics: [metric("rss", "n/a", "MB")], errors: errors.report(), notes: [] };
    }
    ctx.rss?.sample();
    const parts = readRssParts(o.pid);
    // A server may hand memory back once a burst is over (Troupe: idle GC + C-heap trim after ~2 s)
    let idle: ReturnType<typeof readRss> = null;
    if (o.rssSettleMs > 0) {
      await new Promise((r) => setTimeout(r, o.rssSettleMs));
      idle = readRss(o.pid, o.pidTree);
    }
    const idleParts = idle === null ? null : readRssParts(o.pid);
    return {
      metrics: [
        metric("rss", end.mb, "MB"),
        metric("rss_anon", parts ? Number(parts.anonMb.toFixed(1)) : null, "MB"),
        metric("rss_file", parts ? Number(parts.fileMb.toFixed(1)) : null, "MB"),
        metric("rss_idle", idle?.mb ?? null, "MB"),
        metric("rss_idle_anon", idleParts ? Number(idleParts.anonMb.toFixed(1)) : null, "MB"),
        metric("rss_idle_file", idleParts ? Number(idleParts.fileMb.toFixed(1)) : null, "MB"),
        metric("rss_start", ctx.rss?.start?.mb ?? null, "MB"),
        metric("rss_peak", ctx.rss?.peak ?? null, "MB"),
        metric("processes", end.processes, "count"),
      ],
      errors: errors.report(),
      notes: [],
    };
  },
};
