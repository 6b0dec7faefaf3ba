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
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
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
 * Compiles `entries` (absolute paths) into `<outDir>/<content hash>/` and removes older builds
 * there. An entry that does not compile is reported in `errors` instead of failing the others.
 * When no file the last build read has changed since (size and mtime, packages included), that
 * build is reused without running esbuild at all (`<outDir>/manifest.json`).
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
    let outputs: BuildOutputs;
    try {
      outputs = await bundle(esbuild, toCompile, outDir);
    } catch (err) {
      // isolate the entries that fail, so one broken graph file does not take the others down
      const ok: string[] = [];
      for (const entry of toCompile) {
        try {
          await bundle(esbuild, [entry], outDir);
          ok.push(entry);
        } catch (e) {
          result.errors[entry] = buildFailureText(e);
        }
      }
      if (ok.length === toCompile.length) throw err; // fails only together: nothing to isolate
      if (ok.length === 0) return result;
      outputs = await bundle(esbuild, ok, outDir);
    }
    const dir = writeBuild(outputs, outDir, opts.keepBuilds ?? 1);
    // only the entries asked for: code-split chunks of dynamic imports have an entry point of their own
    const compiled: Record<string, string> = {};
    for (const entry of toCompile) {
      const file = outputs.entries.get(entry);
      if (file !== undefined) compiled[entry] = result.urls[entry] = pathToFileURL(join(dir, file)).href;
    }
    // a build with failures is never reused: the fix may be in a file it could not even read
    if (Object.keys(result.errors).length === 0) writeManifest(outDir, { entries: toCompile, urls: compiled, inputs: stamps(outputs.inputs) });
    return result;
  } finally {
    await esbuild.stop(); // the helper process is only needed while compiling
  }
}

interface Manifest {
  entries: string[];
  urls: Record<string, string>;
  /** every file the build read or points to: [size, mtimeMs] */
  inputs: Record<string, [number, number]>;
}

const MANIFEST = "manifest.json";

function stamps(files: Iterable<string>): Record<string, [number, number]> {
  const out: Record<string, [number, number]> = {};
  for (const f of files) {
    const st = statSync(f, { throwIfNoEntry: false });
    if (st) out[f] = [st.size, st.mtimeMs];
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
  for (const [file, [size, mtimeMs]] of Object.entries(manifest.inputs)) {
    const st = statSync(file, { throwIfNoEntry: false });
    if (!st || st.size !== size || st.mtimeMs !== mtimeMs) return null;
  }
  for (const url of Object.values(manifest.urls)) if (!existsSync(new URL(url))) return null;
  return manifest.urls;
}

function writeManifest(outDir: string, manifest: Manifest): void {
  const tmp = join(outDir, `${MANIFEST}.${process.pid}.tmp`);
  writeFileSync(tmp, JSON.stringify(manifest));
  renameSync(tmp, join(outDir, MANIFEST));
}

interface BuildOutputs {
  /** relative output path → contents */
  files: Map<string, Uint8Array>;
  /** absolute paths of the sources bundled and of the package files left external */
  inputs: Set<string>;
  /** absolute entry source path → relative output path of its module */
  entries: Map<string, string>;
}

type Esbuild = typeof import("esbuild");

async function bundle(esbuild: Esbuild, entries: readonly string[], outDir: string): Promise<BuildOutputs> {
  const external = new Set<string>();
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
    plugins: [externalPackages(external), sourceFileMeta],
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
  const inputs = new Set([...external, ...sources, ...buildSettingsOf(sources), ...compilerFiles()]);
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

/** Our sources and the user's: `import.meta.*` and CommonJS `__dirname` keep naming the source file. */
const sourceFileMeta: Plugin = {
  name: "troupe-source-file-meta",
  setup(build) {
    build.onLoad({ filter: /\.(?:[cm]?[jt]s|[jt]sx)$/ }, async (args) => {
      if (args.path.split(sep).includes("node_modules")) return undefined;
      let text = await readFile(args.path, "utf8");
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
};

function loaderFor(path: string): Loader {
  if (path.endsWith(".tsx")) return "tsx";
  if (path.endsWith(".jsx")) return "jsx";
  return /\.[cm]?ts$/.test(path) ? "ts" : "js";
}

/**
 * Writes the build under its content hash (reused when unchanged) and removes older builds but the
 * `keep - 1` newest (a shared cache keeps a few: another process may still run an older one).
 */
function writeBuild(outputs: BuildOutputs, outDir: string, keep: number): string {
  const hash = createHash("sha256");
  for (const [name, contents] of [...outputs.files].sort(([a], [b]) => (a < b ? -1 : 1))) hash.update(name).update("\0").update(contents);
  const id = hash.digest("hex").slice(0, 16);
  const dir = join(outDir, id);
  if (!existsSync(dir)) {
    const staging = `${dir}.${process.pid}.tmp`;
    rmSync(staging, { recursive: true, force: true });
    for (const [name, contents] of outputs.files) {
      mkdirSync(dirname(join(staging, name)), { recursive: true });
      writeFileSync(join(staging, name), contents);
    }
    try {
      renameSync(staging, dir);
    } catch (err) {
      rmSync(staging, { recursive: true, force: true });
      if (!existsSync(dir)) throw err; // another process wrote the same build first: fine
    }
  }
  const now = new Date();
  utimesSync(dir, now, now); // newest first below, also when this build already existed
  const older = readdirSync(outDir)
    .filter((name) => name !== id && name !== MANIFEST && !name.endsWith(".tmp"))
    .map((name) => ({ name, mtime: statSync(join(outDir, name), { throwIfNoEntry: false })?.mtimeMs ?? 0 }))
    .sort((a, b) => b.mtime - a.mtime);
  for (const { name } of older.slice(Math.max(0, keep - 1))) rmSync(join(outDir, name), { recursive: true, force: true });
  return dir;
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
