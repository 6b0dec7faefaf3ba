// Opt-in timeline trace (TROUPE_TRACE=<file>): each thread buffers "<epoch ms> <thread> <what>"
// lines and appends them to the file every 100 ms and at exit. Off (the default), `trace` is
// undefined and call sites (`trace?.(...)`) cost a property check.
import { appendFileSync } from "node:fs";
import { threadId } from "node:worker_threads";

const file = process.env.TROUPE_TRACE;

function makeTrace(path: string): (what: string) => void {
  const lines: string[] = [];
  const flush = () => {
    if (lines.length > 0) appendFileSync(path, lines.splice(0).join(""));
  };
  setInterval(flush, 100).unref();
  process.on("exit", flush);
  const origin = performance.timeOrigin;
  return (what) => {
    lines.push(`${(origin + performance.now()).toFixed(3)} t${threadId} ${what}\n`);
  };
}

export const trace: ((what: string) => void) | undefined = file ? makeTrace(file) : undefined;
