#!/usr/bin/env node
// Entry of the `troupe` command: TypeScript sources run through tsx, no build step.
import { setFlagsFromString } from "node:v8";

// Low-memory mode has to reach V8 before the heaps grow and before any worker isolate exists;
// V8 flags are process-wide, so the actor workers inherit it (see README, "Memory").
if (process.argv.slice(2).includes("--low-memory") || process.env.TROUPE_LOW_MEMORY === "1") {
  setFlagsFromString("--optimize-for-size");
  process.stdout.write("troupe: low-memory mode (V8 --optimize-for-size)\n");
}
const { register } = await import("tsx/esm/api");

register();
await import("../src/cli.ts");
