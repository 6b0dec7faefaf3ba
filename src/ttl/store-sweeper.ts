// Removes expired store items (config `store.ttl.sweep_interval_minutes`; null: no sweep, expired
// items stay hidden from reads). Runs on the HTTP thread; see src/storage/store-ttl.ts.
import type { Storage } from "../storage/env.ts";
import { sweepExpiredItems } from "../storage/store-ttl.ts";
import { componentLog } from "../log/logger.ts";

/** Items removed per transaction; a sweep repeats until none are left. */
const BATCH = 1000;

/** Starts the periodic sweep; returns the stop function. */
export function startStoreTtlSweep(storage: Storage, intervalMinutes: number): () => void {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    void (async () => {
      while ((await sweepExpiredItems(storage, BATCH)) === BATCH) await new Promise((r) => setImmediate(r));
    })()
      .catch((err: unknown) => componentLog("ttl").error("store TTL sweep failed", { err }))
      .finally(() => (running = false));
  }, intervalMinutes * 60_000);
  timer.unref();
  return () => clearInterval(timer);
}
