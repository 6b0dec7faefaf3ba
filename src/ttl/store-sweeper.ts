// Removes expired store items (config `store.ttl.sweep_interval_minutes`; null: no sweep, expired
// items stay hidden from reads). Runs on the HTTP thread; see src/storage/store-ttl.ts.
import type { StorePort } from "../storage/port.ts";
import { componentLog } from "../log/logger.ts";

/** Items removed per transaction; a sweep repeats until none are left. */
const BATCH = 1000;

/** One sweep: removes every expired item, a batch at a time (a cluster runs it as a singleton job). */
export async function sweepStoreOnce(store: Pick<StorePort, "sweepExpired">): Promise<void> {
  while ((await store.sweepExpired(BATCH)) === BATCH) await new Promise((r) => setImmediate(r));
}

/** Starts the periodic sweep; returns the stop function. */
export function startStoreTtlSweep(store: StorePort, intervalMinutes: number): () => void {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    sweepStoreOnce(store)
      .catch((err: unknown) => componentLog("ttl").error("store TTL sweep failed", { err }))
      .finally(() => (running = false));
  }, intervalMinutes * 60_000);
  timer.unref();
  return () => clearInterval(timer);
}
