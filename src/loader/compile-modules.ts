// Ahead-of-time compilation of the TypeScript every thread imports (src/cli.ts for bin/troupe.js,
// our worker entries, the user's graph/embed/auth/http.app files), so no thread needs tsx's loader
// hooks. Why: on Node 20 every thread that registers module hooks gets its own hooks thread (a
// whole V8 isolate); tsx on the main thread and in two actor workers cost ~140 MB of RSS
// (bench/RESULTS.md, session 10).
//
// Each build bundles the entry's own files (TypeScript, JSX, local JS) into ESM and leaves every
// package external, pointing at the exact file Node's resolution would pick from the importing
// file's directory (a user project's own node_modules included). Two bundles importing a package
// therefore share one module instance, as they did when Node resolved the bare specifier itself.
// `import.meta.url` (and dirname/filename) keep naming the source file, so paths relative to it work.
//
// The cache (`<outDir>/manifest.json` + one directory per build) is shared: several servers of an
// install start at once, and files change while a build runs (`troupe dev` saves, a git checkout
// rewriting a file: truncated, then written). So a build is recorded as reusable only if it compiled
// the text that is there: each source's stat is taken before its text is read and compared after
// the build, a file esbuild reads itself (tsconfig.json, package.json) must be older than the build,
// and a source written within a clock tick of the build keeps the hash of its compiled text (same
// size and mtime prove nothing there; checked again on reuse). A build that fails this is made again
// (up to BUILD_ATTEMPTS). Writes are temp + rename; a build is removed only when no live process of
// this host runs it (`in-use/<host>.<pid>` names the build each process got from the directory;
// marking and removing take `lock`, so a build cannot go between a process's choice and its mark).
import { createHash } from "node:crypto";
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { hostname } from "node:os";
import { readFile, stat } from "node:fs/promises";
import { builtinModules, createRequire } from "node:module";
import { basename, dirname, extname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { Loader, Message, Plugin } from "esbuild";

/** Files that need compiling; plain .js/.mjs/.cjs entries are imported as they are. */
const NEEDS_COMPILE = /\.(?:ts|tsx|mts|cts|jsx)$/;
/** Package files Node can import directly; anything else reached through a package is bundled. */
const NODE_LOADABLE = /\.(?:js|mjs|cjs)$/;
const BUILTINS = new Set(builtinModules);
/** what `import.meta.*` of our and the user's sources compile to: per-module constants (sourceFileMeta) */
const META = { url: "__troupe_import_meta_url", filename: "__troupe_import_meta_filename", dirname: "__troupe_import_meta_dirname" } as const;
/** marks esbuild's own resolution of a bare specifier, so our onResolve does not recurse */
const INNER_RESOLVE = Symbol("inner-resolve");

export interface CompiledModules {
  /** import URL of each entry by absolute source path: compiled output, or the file itself */
  urls: Record<string, string>;
  /** entries that failed to compile, by absolute source path: esbuild's message */
  errors: Record<string, string>;
}

function needsCompile(path: string): boolean {
  return NEEDS_COMPILE.test(path);
}

/**
 * Compiles `entries` (absolute paths) into `<outDir>/<content hash>/` and removes older builds there
 * that no live process uses. An entry that does not compile is reported in `errors` instead of
 * failing the others. When no file the last build read has changed since (size and mtime, packages
 * included; the text's hash for a source edited around its build), that build is reused without
 * running esbuild at all (`<outDir>/manifest.json`).
 */
export async function compileModules(entries: readonly string[], outDir: string, opts: { keepBuilds?: number } = {}): Promise<CompiledModules> {
  const result: CompiledModules = { urls: {}, errors: {} };
  const toCompile = [...new Set(entries.map((e) => resolve(e)))]
    .filter((e) => {
      if (needsCompile(e)) return true;
      result.urls[e] = pathToFileURL(e).href;
      return false;
    })
    .sort();
  if (toCompile.length === 0) return result;
  const reused = reusableBuild(toCompile, outDir);
  if (reused !== null) {
    for (const [entry, url] of Object.entries(reused)) result.urls[entry] = url;
    return result;
  }
  const esbuild = await import("esbuild");
  try {
    for (let attempt = 1; ; attempt++) {
      const started = Date.now();
      const errors: Record<string, string> = {};
      const outputs = await bundleIsolatingFailures(esbuild, toCompile, outDir, errors);
      const settled = outputs && settle(outputs.inputs, started);
      // a file changed while esbuild read the sources: this build may mix its old and new text
      if (outputs !== null && settled === null && attempt < BUILD_ATTEMPTS) continue;
      result.errors = errors;
      if (outputs === null) return result;
      const dir = writeBuild(outputs, outDir, opts.keepBuilds ?? 1);
      // only the entries asked for: code-split chunks of dynamic imports have an entry point of their own
      const compiled: Record<string, string> = {};
      for (const entry of toCompile) {
        const file = outputs.entries.get(entry);
        if (file !== undefined) compiled[entry] = result.urls[entry] = pathToFileURL(join(dir, file)).href;
      }
      // a build with failures is never reused: the fix may be in a file it could not even read; one
      // whose files kept changing is used now (the newest we could make) and built again next time
      if (Object.keys(errors).length === 0 && settled) writeManifest(outDir, { entries: toCompile, urls: compiled, inputs: settled });
      return result;
    }
  } finally {
    await esbuild.stop(); // the helper process is only needed while compiling
  }
}

/** builds of one call, when files keep changing under it (an editor saving, a checkout running) */
const BUILD_ATTEMPTS = 3;
/**
 * How far a file's mtime may trail the wall clock at its write: Linux stamps files from a coarse
 * clock (one tick, <= 10 ms). A filesystem with coarser timestamps (1-2 s) is only as exact as the
 * size and the recorded hashes.
 */
const FS_CLOCK_SLACK_MS = 20;

/** All entries together, else each alone, so one broken graph file does not take the others down; null: none compiles. */
async function bundleIsolatingFailures(
  esbuild: Esbuild,
  toCompile: readonly string[],
  outDir: string,
  errors: Record<string, string>,
): Promise<BuildOutputs | null> {
  try {
    return await bundle(esbuild, toCompile, outDir);
  } catch (err) {
    const ok: string[] = [];
    for (const entry of toCompile) {
      try {
        await bundle(esbuild, [entry], outDir);
        ok.push(entry);
      } catch (e) {
        errors[entry] = buildFailureText(e);
      }
    }
    if (ok.length === toCompile.length) throw err; // fails only together: nothing to isolate
    if (ok.length === 0) return null;
    return await bundle(esbuild, ok, outDir);
  }
}

/** [size, mtimeMs], and for a source modified around its build the sha256 of the text compiled */
type Stamp = [number, number] | [number, number, string];

interface Manifest {
  entries: string[];
  urls: Record<string, string>;
  /** every file the build read or points to */
  inputs: Record<string, Stamp>;
}

const MANIFEST = "manifest.json";

/**
 * The stamps to record for a build's inputs, or null when one changed while the build ran: a source
 * whose stat differs from the one taken before its text was read, or any input (esbuild reads the
 * build settings and package.json files itself) modified after the build started.
 */
function settle(inputs: Map<string, ReadSource | null>, started: number): Record<string, Stamp> | null {
  const out: Record<string, Stamp> = {};
  const now = Date.now();
  for (const [file, read] of inputs) {
    const st = statSync(file, { throwIfNoEntry: false });
    if (!st) return null; // removed since it was read or resolved
    const recent = st.mtimeMs >= started - FS_CLOCK_SLACK_MS && st.mtimeMs <= now + FS_CLOCK_SLACK_MS;
    if (read === null) {
      if (recent) return null;
      out[file] = [st.size, st.mtimeMs];
      continue;
    }
    if (st.size !== read.size || st.mtimeMs !== read.mtimeMs) return null;
    if (!recent) {
      out[file] = [st.size, st.mtimeMs];
      continue;
    }
    // written within a clock tick of the build: a same-size edit would not show in the stat, the text does
    if (sha256Of(readFileSync(file)) !== read.sha256) return null;
    out[file] = [st.size, st.mtimeMs, read.sha256]; // and is checked again on reuse, for the same reason
  }
  return out;
}

function reusableBuild(entries: readonly string[], outDir: string): Record<string, string> | null {
  let manifest: Manifest;
  try {
    manifest = JSON.parse(readFileSync(join(outDir, MANIFEST), "utf8")) as Manifest;
  } catch {
    return null;
  }
  if (manifest.entries.length !== entries.length || manifest.entries.some((e, i) => e !== entries[i])) return null;
  for (const [file, [size, mtimeMs, sha256]] of Object.entries(manifest.inputs)) {
    const st = statSync(file, { throwIfNoEntry: false });
    if (!st || st.size !== size || st.mtimeMs !== mtimeMs) return null;
    if (sha256 !== undefined && sha256Of(readFileSync(file)) !== sha256) return null;
  }
  const urls = Object.values(manifest.urls);
  const id = urls.length > 0 ? buildIdOf(outDir, urls[0]!) : null;
  if (id === null) return null;
  // registered before it is imported, so no other process removes it meanwhile
  const present = withCacheLock(outDir, () => {
    if (!urls.every((url) => existsSync(new URL(url)))) return false;
    markInUse(outDir, id);
    return true;
  });
  return present ? manifest.urls : null;
}

function sha256Of(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/** the build directory's name of an output URL directly in `<outDir>/<id>/`, else null */
function buildIdOf(outDir: string, url: string): string | null {
  const dir = dirname(fileURLToPath(url));
  return dirname(dir) === resolve(outDir) ? basename(dir) : null;
}

function writeManifest(outDir: string, manifest: Manifest): void {
  const tmp = join(outDir, `${MANIFEST}.${process.pid}.tmp`);
  writeFileSync(tmp, JSON.stringify(manifest));
  renameSync(tmp, join(outDir, MANIFEST));
}

/** a source as our onLoad read it: its stat taken before the read, and the text's hash */
interface ReadSource {
  size: number;
  mtimeMs: number;
  sha256: string;
}

interface BuildOutputs {
  /** relative output path → contents */
  files: Map<string, Uint8Array>;
  /** absolute paths of the files bundled and of the package files left external; our onLoad's reads */
  inputs: Map<string, ReadSource | null>;
  /** absolute entry source path → relative output path of its module */
  entries: Map<string, string>;
}

type Esbuild = typeof import("esbuild");

async function bundle(esbuild: Esbuild, entries: readonly string[], outDir: string): Promise<BuildOutputs> {
  const external = new Set<string>();
  const reads = new Map<string, ReadSource>();
  const entryPoints: Record<string, string> = {};
  entries.forEach((e, i) => (entryPoints[`${basename(e, extname(e))}-${i}`] = e));
  // the files end up in <outDir>/<hash>/: same depth, so the source maps' relative paths hold
  const outdir = join(resolve(outDir), "staging");
  const built = await esbuild.build({
    entryPoints,
    outdir,
    bundle: true,
    splitting: true, // modules shared by two entries (e.g. tools used by two graphs) stay one instance
    format: "esm",
    platform: "node",
    target: "node20",
    outExtension: { ".js": ".mjs" },
    conditions: [], // Node's conditions only (import/require, node, default): no "module"
    mainFields: ["main"], // as Node, which ignores "module"
    keepNames: true, // function.name is what LangChain names a runnable/node after
    sourcemap: "linked",
    sourcesContent: false,
    metafile: true,
    write: false,
    logLevel: "silent",
    plugins: [externalPackages(external), sourceFileMeta(reads)],
    // CommonJS-style `require(...)` in a source (tsx allowed it): esbuild's ESM output calls it
    // through a shim that needs a `require` in scope
    banner: { js: 'import { createRequire as __troupeCreateRequire } from "node:module"; const require = __troupeCreateRequire(import.meta.url);' },
    define: { "import.meta.url": META.url, "import.meta.filename": META.filename, "import.meta.dirname": META.dirname },
  });
  const files = new Map<string, Uint8Array>();
  for (const f of built.outputFiles) files.set(relative(outdir, f.path), f.contents);
  const entries2 = new Map<string, string>();
  for (const [out, meta] of Object.entries(built.metafile.outputs)) {
    if (meta.entryPoint !== undefined) entries2.set(resolve(meta.entryPoint), relative(outdir, resolve(out)));
  }
  const sources = Object.keys(built.metafile.inputs).map((f) => resolve(f));
  const inputs = new Map<string, ReadSource | null>();
  for (const f of [...external, ...sources, ...buildSettingsOf(sources), ...compilerFiles()]) inputs.set(f, reads.get(f) ?? null);
  return { files, inputs, entries: entries2 };
}

/**
 * This compiler's own source and esbuild's entry file: a build made by another version of either
 * (a Troupe or esbuild upgrade) is not reused.
 */
function compilerFiles(): string[] {
  const files: string[] = [];
  try {
    const self = fileURLToPath(import.meta.url); // the source file, also when this module runs compiled
    files.push(self, createRequire(self).resolve("esbuild"));
  } catch {
    // not resolvable from here: the other inputs still decide
  }
  return files;
}

/**
 * The nearest tsconfig.json and package.json above each source: they steer how esbuild compiles
 * and resolves it (paths, decorators, JSX, "imports" aliases), so a change to them is a change too.
 */
function buildSettingsOf(sources: readonly string[]): Set<string> {
  const nearest = new Map<string, string | null>(); // `${name}\0${dir}` -> the file, or null: none up to the root
  const find = (dir: string, name: string): string | null => {
    const key = `${name}\0${dir}`;
    let found = nearest.get(key);
    if (found === undefined) {
      const here = join(dir, name);
      found = existsSync(here) ? here : dirname(dir) === dir ? null : find(dirname(dir), name);
      nearest.set(key, found);
    }
    return found;
  };
  const out = new Set<string>();
  for (const source of sources) {
    if (source.split(sep).includes("node_modules")) continue;
    for (const name of ["tsconfig.json", "package.json"]) {
      const file = find(dirname(source), name);
      if (file !== null) out.add(file);
    }
  }
  return out;
}

/** Bare specifiers: builtins stay as they are, package files become absolute file URLs. */
const externalPackages = (seen: Set<string>): Plugin => ({
  name: "troupe-external-packages",
  setup(build) {
    build.onResolve({ filter: /^[^./]/ }, async (args) => {
      if (args.pluginData === INNER_RESOLVE) return undefined;
      const bare = args.path.startsWith("node:") ? args.path.slice(5) : args.path;
      if (BUILTINS.has(bare.split("/")[0]!) || BUILTINS.has(bare)) return { path: args.path, external: true };
      const found = await build.resolve(args.path, { kind: args.kind, importer: args.importer, resolveDir: args.resolveDir, pluginData: INNER_RESOLVE });
      if (found.errors.length > 0) return { errors: found.errors };
      if (found.external) return { path: args.path, external: true };
      const inPackage = found.path.split(sep).includes("node_modules");
      // workspace packages (symlinked source) and TypeScript-only packages are compiled with us
      if (!inPackage || !NODE_LOADABLE.test(found.path)) return { path: found.path, sideEffects: found.sideEffects };
      seen.add(found.path);
      // require() takes a path, import a URL
      return { path: args.kind === "require-call" ? found.path : pathToFileURL(found.path).href, external: true };
    });
  },
});

/**
 * Our sources and the user's: `import.meta.*` and CommonJS `__dirname` keep naming the source file.
 * Each read goes into `reads` with the file's stat taken before it, so a change while it is read shows.
 */
const sourceFileMeta = (reads: Map<string, ReadSource>): Plugin => ({
  name: "troupe-source-file-meta",
  setup(build) {
    build.onLoad({ filter: /\.(?:[cm]?[jt]s|[jt]sx)$/ }, async (args) => {
      if (args.path.split(sep).includes("node_modules")) return undefined;
      const before = await stat(args.path);
      const bytes = await readFile(args.path);
      reads.set(args.path, { size: before.size, mtimeMs: before.mtimeMs, sha256: sha256Of(bytes) });
      let text = bytes.toString("utf8");
      // `define` (see bundle()) turned import.meta.url/filename/dirname into these names; declared
      // per module, so each names its own source file (esbuild renames colliding top-level names)
      const prelude: string[] = [];
      if (text.includes("import.meta")) {
        prelude.push(
          `const ${META.url} = ${JSON.stringify(pathToFileURL(args.path).href)};`,
          `const ${META.filename} = ${JSON.stringify(args.path)};`,
          `const ${META.dirname} = ${JSON.stringify(dirname(args.path))};`,
        );
      }
      // CommonJS-style files (tsx runs .ts in a package without "type": "module" as CommonJS)
      const declares = (name: string) => new RegExp(`\\b(?:const|let|var|function)\\s+${name}\\b`).test(text);
      if (/\b__filename\b/.test(text) && !declares("__filename")) prelude.push(`var __filename = ${JSON.stringify(args.path)};`);
      if (/\b__dirname\b/.test(text) && !declares("__dirname")) prelude.push(`var __dirname = ${JSON.stringify(dirname(args.path))};`);
      if (prelude.length > 0) text = `${prelude.join(" ")}${text}`; // one line: source maps stay aligned
      return { contents: text, loader: loaderFor(args.path), resolveDir: dirname(args.path) };
    });
  },
});

function loaderFor(path: string): Loader {
  if (path.endsWith(".tsx")) return "tsx";
  if (path.endsWith(".jsx")) return "jsx";
  return /\.[cm]?ts$/.test(path) ? "ts" : "js";
}

/**
 * Writes the build under its content hash (reused when unchanged), marks it in use by this process,
 * and removes older builds but the `keep - 1` newest (a shared cache keeps a few for the next start
 * of an older checkout), never one a live process of this host has in use.
 */
function writeBuild(outputs: BuildOutputs, outDir: string, keep: number): string {
  const hash = createHash("sha256");
  for (const [name, contents] of [...outputs.files].sort(([a], [b]) => (a < b ? -1 : 1))) hash.update(name).update("\0").update(contents);
  const id = hash.digest("hex").slice(0, 16);
  const dir = join(outDir, id);
  const staging = `${dir}.${process.pid}.tmp`;
  let staged = false;
  const stage = () => {
    rmSync(staging, { recursive: true, force: true });
    for (const [name, contents] of outputs.files) {
      mkdirSync(dirname(join(staging, name)), { recursive: true });
      writeFileSync(join(staging, name), contents);
    }
    staged = true;
  };
  if (!existsSync(dir)) stage(); // outside the lock: the writing takes longest
  withCacheLock(outDir, () => {
    if (!existsSync(dir)) {
      if (!staged) stage(); // removed since we looked (rare)
      try {
        renameSync(staging, dir);
      } catch (err) {
        if (!existsSync(dir)) throw err;
        // another process wrote the same build first: fine
      }
    }
    if (staged) rmSync(staging, { recursive: true, force: true });
    const now = new Date();
    utimesSync(dir, now, now); // newest first below, also when this build already existed
    markInUse(outDir, id);
    const inUse = buildsInUse(outDir);
    const older = readdirSync(outDir)
      .filter((name) => name !== id && BUILD_ID.test(name))
      .map((name) => ({ name, mtime: statSync(join(outDir, name), { throwIfNoEntry: false })?.mtimeMs ?? 0 }))
      .sort((a, b) => b.mtime - a.mtime);
    for (const { name } of older.slice(Math.max(0, keep - 1))) if (!inUse.has(name)) rmSync(join(outDir, name), { recursive: true, force: true });
  });
  return dir;
}

/** names of build directories (16 hex digits of the content hash) */
const BUILD_ID = /^[0-9a-f]{16}$/;
const IN_USE = "in-use";
const THIS_PROCESS = `${hostname()}.${process.pid}`;

/** `in-use/<host>.<pid>` holds the build id this process runs from `outDir` (its newest: one per process). Under the lock. */
function markInUse(outDir: string, id: string): void {
  const marks = join(outDir, IN_USE);
  const mark = join(marks, THIS_PROCESS);
  try {
    if (readFileSync(mark, "utf8") === id) return; // rewriting a file costs a flush (ext4), reading it does not
  } catch {
    mkdirSync(marks, { recursive: true }); // this process's first mark here
  }
  writeFileSync(mark, id);
}

/** Builds a live process uses; a process of another host counts as live (its pid says nothing here). Under the lock. */
function buildsInUse(outDir: string): Set<string> {
  const marks = join(outDir, IN_USE);
  const ids = new Set<string>();
  let names: string[];
  try {
    names = readdirSync(marks);
  } catch {
    return ids;
  }
  const host = `${hostname()}.`;
  for (const name of names) {
    const pid = Number(name.slice(host.length));
    if (name.startsWith(host) && Number.isInteger(pid) && !isAlive(pid)) {
      rmSync(join(marks, name), { force: true });
      continue;
    }
    try {
      ids.add(readFileSync(join(marks, name), "utf8"));
    } catch {
      // removed meanwhile by another host's process
    }
  }
  return ids;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM"; // alive, another user's
  }
}

/** a lock held longer than this is a crashed holder's (the work under it is a few file operations) */
const LOCK_STALE_MS = 10_000;
const sleeper = new Int32Array(new SharedArrayBuffer(4));

/**
 * Runs `fn` holding `<outDir>/lock` (created exclusively: atomic): marking a build in use and
 * removing builds not in use must not interleave, or a build could be removed between another
 * process's choice of it and its mark. Held for a few file operations; waits synchronously (the
 * startup path, nothing else to do). A file, not a directory: its unlink costs a fraction of an rmdir.
 */
function withCacheLock<T>(outDir: string, fn: () => T): T {
  const lock = join(outDir, "lock");
  mkdirSync(outDir, { recursive: true });
  for (;;) {
    try {
      closeSync(openSync(lock, "wx"));
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const held = statSync(lock, { throwIfNoEntry: false });
      if (held && Date.now() - held.mtimeMs > LOCK_STALE_MS) rmSync(lock, { force: true });
      else Atomics.wait(sleeper, 0, 0, 5);
    }
  }
  try {
    return fn();
  } finally {
    unlinkSync(lock);
  }
}

function buildFailureText(err: unknown): string {
  const failure = err as { errors?: Message[] };
  if (Array.isArray(failure.errors) && failure.errors.length > 0) {
    return failure.errors
      .slice(0, 5)
      .map((m) => (m.location ? `${m.location.file}:${m.location.line}:${m.location.column}: ${m.text}` : m.text))
      .join("; ");
  }
  return err instanceof Error ? err.message : String(err);
}
