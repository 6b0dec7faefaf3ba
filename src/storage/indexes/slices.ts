// Long index walks and scans run on the HTTP thread in slices: after SLICE_MS of work a walk waits
// for a later event-loop turn (setImmediate), so requests that arrived meanwhile are served
// before it goes on. The budget is shared: walks resumed in the same turn (the loop's check
// phase) take turns within one SLICE_MS between them — a walk that finds it used up waits for the
// next turn — so however many long queries run at once, each turn's I/O waits at most about
// SLICE_MS behind them (plus the first slice of each query that arrived in that turn).
import { performance } from "node:perf_hooks";

/** Longest stretch of synchronous work queries do between two event-loop turns. */
export const SLICE_MS = 4;

/** When the current turn's resumed walks started (set by a marker queued ahead of them). */
let turnStart = 0;
let markerQueued = false;

function queueTurnMarker(): void {
  if (markerQueued) return;
  markerQueued = true;
  setImmediate(() => {
    markerQueued = false;
    turnStart = performance.now();
  });
}

export class Slicer {
  private started = performance.now();

  constructor(private readonly sliceMs = SLICE_MS) {}

  /** Whether this slice is used up (check it between units of work; then await tick()). */
  due(): boolean {
    return performance.now() - this.started >= this.sliceMs;
  }

  /** Yields to the event loop once the slice is used up, until a turn has budget left. */
  async tick(): Promise<void> {
    if (!this.due()) return;
    do {
      queueTurnMarker(); // queued before our own resume: it runs first in that turn
      await new Promise<void>((resolve) => setImmediate(resolve));
    } while (performance.now() - turnStart >= this.sliceMs);
    this.started = turnStart;
  }
}
