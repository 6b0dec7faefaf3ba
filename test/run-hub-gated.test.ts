// RunHub's gated-run bookkeeping: what a join stream asks before it decides a run has ended unseen.
import { describe, expect, it } from "vitest";
import { RunHub } from "../src/hub/run-hub.ts";

describe("RunHub gated runs", () => {
  it("a gated run is awaited until its end reaches the hub, then neither indexed nor awaited", () => {
    const hub = new RunHub();
    hub.expect("r1", "t1", false, false);
    hub.expect("r2", "t1", false, true);
    expect(hub.isAwaitedGated("r1")).toBe(true);
    expect(hub.isAwaitedGated("r2")).toBe(false); // observed from its start: nothing held in its worker
    expect(hub.gatedRunsOf("t1")).toEqual(["r1"]);

    hub.finished({ runId: "r1", threadId: "t1", status: "success", threadStatus: "idle" });
    expect(hub.isAwaitedGated("r1")).toBe(false);
    expect(hub.isGated("r1")).toBe(true); // a late join still fetches the worker's buffer
    expect(hub.gatedRunsOf("t1")).toEqual([]);
  });

  it("an observed run is no longer awaited as gated; an unknown run never is", () => {
    const hub = new RunHub();
    hub.expect("r1", "t1", false, false);
    hub.markObserved("r1");
    expect(hub.isAwaitedGated("r1")).toBe(false);
    expect(hub.isAwaitedGated("nope")).toBe(false);
  });
});
