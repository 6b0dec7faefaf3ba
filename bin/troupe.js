#!/usr/bin/env node
// Entry of the `troupe` command. Our TypeScript runs compiled, not through tsx: on Node 20 module
// hooks run in a hooks thread, a whole V8 isolate (~30 MB). src/loader/compile-modules.ts bundles
// src/cli.ts (with esbuild, packages left external) into a compile cache and reuses that build
// while no file it read has changed, so a warm start runs no compiler at all.
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { setFlagsFromString } from "node:v8";

// Low-memory mode has to reach V8 before the heaps grow and before any worker isolate exists;
// V8 flags are process-wide, so the actor workers inherit it (see README, "Memory").
if (process.argv.slice(2).includes("--low-memory") || process.env.TROUPE_LOW_MEMORY === "1") {
  setFlagsFromString("--optimize-for-size");
  process.stdout.write("troupe: low-memory mode (V8 --optimize-for-size)\n");
}
// V8's memory reducer shrinks a heap a load burst grew, but only starts 8 s after the last full GC;
// with 1 s it follows the idle GC (src/util/idle-gc.ts) closely. It only acts while a thread
// allocates little, so it does not run under load.
setFlagsFromString("--gc-memory-reducer-start-delay-ms=1000");

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const LOADER_SOURCE = join(ROOT, "src/loader/compile-modules.ts");
const CLI_SOURCE = join(ROOT, "src/cli.ts");

/** node_modules/.cache/troupe of this install, or a per-user temp dir when that is not writable. */
function compileCacheDir() {
  for (const dir of [join(ROOT, "node_modules/.cache/troupe"), join(tmpdir(), `troupe-compile-cache-${process.getuid?.() ?? "user"}`)]) {
    try {
      mkdirSync(dir, { recursive: true });
      return dir;
    } catch {
      // not writable: next candidate
    }
  }
  throw new Error("troupe: no writable directory for compiled code (tried node_modules/.cache/troupe and the temp dir)");
}

/** The compiler module itself, compiled once per version of its source (it imports only builtins and esbuild). */
async function loadCompiler(cache) {
  const st = statSync(LOADER_SOURCE);
  const out = join(cache, "loader", `compile-modules-${st.size}-${Math.trunc(st.mtimeMs)}.mjs`);
  if (!existsSync(out)) {
    const esbuild = await import("esbuild");
    const esbuildUrl = import.meta.resolve("esbuild");
    const tmp = `${out}.${process.pid}.tmp`;
    mkdirSync(dirname(out), { recursive: true });
    await esbuild.build({
      entryPoints: [LOADER_SOURCE],
      outfile: tmp,
      bundle: true,
      format: "esm",
      platform: "node",
      target: "node20",
      logLevel: "error",
      // the output may live outside this install (temp dir): point "esbuild" at this install's copy
      plugins: [{ name: "esbuild-here", setup: (b) => b.onResolve({ filter: /^esbuild$/ }, () => ({ path: esbuildUrl, external: true })) }],
    });
    await esbuild.stop();
    renameSync(tmp, out);
    for (const old of readdirSync(dirname(out))) {
      // compilers of earlier versions of the source (a running process has its copy loaded already;
      // one written in the last minute may be a starting process's, between its rename and its import)
      if (old === basename(out) || !old.startsWith("compile-modules-") || old.endsWith(".tmp")) continue;
      const written = statSync(join(dirname(out), old), { throwIfNoEntry: false })?.mtimeMs ?? 0;
      if (Date.now() - written > 60_000) rmSync(join(dirname(out), old), { force: true });
    }
  }
  return import(pathToFileURL(out).href);
}

const cache = process.env.TROUPE_COMPILE_CACHE ?? compileCacheDir();
process.env.TROUPE_COMPILE_CACHE = cache; // src/loader/runtime-modules.ts puts the worker code there too
const { compileModules } = await loadCompiler(cache);
const cli = await compileModules([CLI_SOURCE], join(cache, "cli"), { keepBuilds: 3 });
if (cli.errors[CLI_SOURCE] !== undefined) {
  process.stderr.write(`troupe: its own sources do not compile: ${cli.errors[CLI_SOURCE]}\n`);
  process.exit(1);
}
process.setSourceMapsEnabled(true); // stack traces name the .ts sources (linked source maps)
await import(cli.urls[CLI_SOURCE]);
