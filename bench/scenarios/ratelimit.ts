// ratelimit: what Troupe's platform rate limiter costs per request, as a share of the /ok
// throughput measured against the target server, and its exactness with 2 threads on one bucket.
// The limiter runs in this process (it is Troupe's own code); the /ok load is the real server
// (run it with limits off, or scaled up so /ok is never throttled). For the end-to-end figure,
// compare the `ok` scenario on `serve --rate-limit off` and `serve --rate-limit us --rate-limit-scale 100000`.
import { ErrorTally } from "../error-tally.ts";
import { checkCostNs, race, RACE } from "../ratelimit-bench.ts";
import { okScenario } from "./concurrency.ts";
import { metric } from "./metrics.ts";
import type { Scenario, ScenarioOutcome } from "./types.ts";

export const ratelimitScenario: Scenario = {
  name: "ratelimit",
  describe: (o) => `rate limiter: CPU ns per check vs /ok req/s (${o.durationMs / 1000} s load), and 2-thread race on one bucket`,
  async run(ctx): Promise<ScenarioOutcome> {
    const errors = new ErrorTally();
    const ok = await okScenario.run(ctx);
    const rps = Number(ok.metrics.find((m) => m.metric === "throughput")?.value ?? 0);
    const ns = checkCostNs();
    const r = await race();
    const admitted = r.admitted.reduce((a, b) => a + b, 0);
    if (admitted !== RACE.capacity) errors.add("race mismatch", `admitted ${admitted} of ${RACE.capacity}`);
    return {
      metrics: [
        metric("check_cpu", Number(ns.toFixed(0)), "ns"),
        metric("ok_throughput", Number(rps.toFixed(0)), "req/s"),
        metric("cost_share", rps > 0 ? Number(((ns * rps) / 1e7).toFixed(2)) : null, "% of /ok"),
        metric("race_capacity", RACE.capacity, "tokens"),
        metric("race_admitted", admitted, "count"),
        metric("race_exact", admitted === RACE.capacity, "bool"),
      ],
      errors: errors.report(),
      notes: ["cost_share = ns per check × measured /ok req/s: the CPU share one limiter check adds to each /ok request"],
    };
  },
};
