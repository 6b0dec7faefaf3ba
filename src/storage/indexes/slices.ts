// Long index walks and scans run on the HTTP thread in slices: after SLICE_MS of work the walk
// waits for the next event-loop turn (setImmediate), so requests that arrived meanwhile are served
// before it goes on. One request thus holds the thread for about SLICE_MS at a time however
// much it reads (a filter no index serves walks every record, in slices).
import { performance } from "node:perf_hooks";

/** Longest stretch of synchronous work a query does before it lets other requests in. */
export const SLICE_MS = 4;

export class Slicer {
  private started = performance.now();

  constructor(private readonly sliceMs = SLICE_MS) {}

  /** Call between units of work (a batch of entries): yields once the slice is used up. */
  async tick(): Promise<void> {
    if (performance.now() - this.started < this.sliceMs) return;
    await new Promise<void>((resolve) => setImmediate(resolve));
    this.started = performance.now();
  }
}
