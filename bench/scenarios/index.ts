// Every scenario by name, in the order a full run executes them.
import type { ScenarioName } from "../options.ts";
import { okScenario, statelessWaitScenario, threadCreateScenario, waitC16Scenario, waitC1Scenario, waitC64Scenario } from "./concurrency.ts";
import { enqueueScenario } from "./enqueue.ts";
import { ratelimitScenario } from "./ratelimit.ts";
import { rssScenario } from "./rss.ts";
import { scaleScenario } from "./scale.ts";
import { slowBurstScenario } from "./slow-burst.ts";
import { streamJoinScenario } from "./stream-join.ts";
import { streamTtfeScenario } from "./stream-ttfe.ts";
import type { Scenario } from "./types.ts";

export const SCENARIOS: Readonly<Record<ScenarioName, Scenario>> = {
  ok: okScenario,
  "thread-create": threadCreateScenario,
  "wait-c1": waitC1Scenario,
  "wait-c16": waitC16Scenario,
  "wait-c64": waitC64Scenario,
  "stateless-wait": statelessWaitScenario,
  "stream-ttfe": streamTtfeScenario,
  "stream-join": streamJoinScenario,
  "enqueue-1000": enqueueScenario,
  "slow-200": slowBurstScenario,
  ratelimit: ratelimitScenario,
  rss: rssScenario,
  scale: scaleScenario,
};
