#!/usr/bin/env node
// Entry of the `troupe` command: TypeScript sources run through tsx, no build step.
import { setFlagsFromString } from "node:v8";

// Low-memory mode has to reach V8 before the heaps grow and before any worker isolate exists;
// V8 flags are process-wide, so the actor workers inherit it (see README, "Memory").
if (process.argv.slice(2).includes("--low-memory") || process.env.TROUPE_LOW_MEMORY === "1") {
  setFlagsFromString("--optimize-for-size");
  process.stdout.write("troupe: low-memory mode (V8 --optimize-for-size)\n");
}
// V8's memory reducer shrinks a heap a load burst grew, but only starts 8 s after the last full GC;
// with 1 s it follows the idle GC (src/util/idle-gc.ts) closely: an idle server gives the memory
// back ~10 s sooner. It only acts while a thread allocates little, so it does not run under load.
setFlagsFromString("--gc-memory-reducer-start-delay-ms=1000");

const { register } = await import("tsx/esm/api");

register();
await import("../src/cli.ts");
