// The compile cache (src/loader/compile-modules.ts) under files that change while a build runs and
// several processes building into one cache directory: a build is reused only if it compiled the
// text that is there now, and no process loses the build it runs.
import { afterEach, describe, expect, it } from "vitest";
import { spawn } from "node:child_process";
import fs, { mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { syncBuiltinESMExports } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { REPO } from "./helpers/server.ts";
import { compileModules } from "../src/loader/compile-modules.ts";

const CHILD = join(REPO, "test/fixtures/compile-cache/compile-child.ts");
const HOUR_AGO = (Date.now() - 3_600_000) / 1000;

let restore: (() => void) | null = null;
afterEach(() => {
  restore?.();
  restore = null;
});

/** Runs `after` once, right after the compiler's read of `file` (the text compiled is the one before). */
function afterReadOf(file: string, before: () => void, after: () => void): void {
  const original = fs.promises.readFile;
  let done = false;
  fs.promises.readFile = (async (path: Parameters<typeof original>[0], options?: Parameters<typeof original>[1]) => {
    if (done || path !== file) return original(path, options);
    done = true;
    before();
    const text = await original(path, options);
    after();
    return text;
  }) as typeof original;
  syncBuiltinESMExports(); // the compiler's `import { readFile } from "node:fs/promises"` sees it
  restore = () => {
    fs.promises.readFile = original;
    syncBuiltinESMExports();
  };
}

function project(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), "troupe-cc-race-"));
  for (const [name, text] of Object.entries(files)) {
    writeFileSync(join(dir, name), text);
    utimesSync(join(dir, name), HOUR_AGO, HOUR_AGO); // written well before any build
  }
  return dir;
}

const POOL = 'export class ClusterShardPool { kind = "pool"; }\n';
const CREATE = 'import { ClusterShardPool } from "./pool.ts";\nexport function create() { return new ClusterShardPool().kind; }\n';

describe("compile cache: files changing while a build runs", () => {
  it("a file rewritten while the build reads it (truncate, then write) is built again, not recorded as built", async () => {
    const dir = project({ "pool.ts": POOL, "create.ts": CREATE });
    const pool = join(dir, "pool.ts");
    const entry = join(dir, "create.ts");
    const out = join(dir, "out");
    // the incident: a checkout rewrote the file; esbuild read it empty, the full text landed before the build ended
    afterReadOf(
      pool,
      () => writeFileSync(pool, ""),
      () => writeFileSync(pool, POOL),
    );
    const first = await compileModules([entry], out);
    restore?.();
    const run = async (url: string) => ((await import(url)) as { create(): string }).create();
    expect(await run(first.urls[entry]!)).toBe("pool"); // old code: TypeError: (void 0) is not a constructor
    const again = await compileModules([entry], out);
    expect(again.urls[entry]).toBe(first.urls[entry]); // the settled build is reused
    rmSync(dir, { recursive: true, force: true });
  });

  it("an edit of the same size within the build's clock tick (stat unchanged) is caught by the text's hash", async () => {
    const dir = project({ "pool.ts": POOL, "create.ts": CREATE });
    const pool = join(dir, "pool.ts");
    const entry = join(dir, "create.ts");
    const out = join(dir, "out");
    const edited = POOL.replace('"pool"', '"POOL"');
    let tick = 0;
    afterReadOf(
      pool,
      () => {
        tick = Date.now() / 1000; // the file was just written (whole ms: restored exactly below)
        utimesSync(pool, tick, tick);
      },
      () => {
        writeFileSync(pool, edited); // another save in the same clock tick: same size, same mtime
        utimesSync(pool, tick, tick);
      },
    );
    const first = await compileModules([entry], out);
    restore?.();
    const run = async (url: string) => ((await import(url)) as { create(): string }).create();
    expect(await run(first.urls[entry]!)).toBe("POOL");
    const again = await compileModules([entry], out);
    expect(await run(again.urls[entry]!)).toBe("POOL"); // old code: the first text, reused as "unchanged"
    rmSync(dir, { recursive: true, force: true });
  });

  it("a build setting esbuild reads itself (package.json) changed during the build: built again with the new one", async () => {
    const dir = project({
      "package.json": JSON.stringify({ type: "module", imports: { "#dep": "./a.ts" } }),
      "a.ts": 'export const which = "a";\n',
      "b.ts": 'export const which = "b";\n',
      "entry.ts": 'export { which } from "#dep";\n',
    });
    const entry = join(dir, "entry.ts");
    const out = join(dir, "out");
    // a.ts is read because esbuild resolved "#dep" with the package.json as it was: then it changes
    afterReadOf(
      join(dir, "a.ts"),
      () => {},
      () => writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module", imports: { "#dep": "./b.ts" } })),
    );
    const first = await compileModules([entry], out);
    restore?.();
    const which = async (url: string) => ((await import(url)) as { which: string }).which;
    expect(await which(first.urls[entry]!)).toBe("b");
    const again = await compileModules([entry], out);
    expect(await which(again.urls[entry]!)).toBe("b"); // old code: "a", recorded with the new package.json's stat
    rmSync(dir, { recursive: true, force: true });
  });
});

interface ChildSays {
  url: string;
  version: number;
  lazy?: string;
}

function startChild(entry: string, out: string, mode?: "hold") {
  const proc = spawn(process.execPath, ["--import", "tsx", CHILD, entry, out, ...(mode ? [mode] : [])], {
    cwd: REPO,
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stderr = "";
  proc.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const lines: ChildSays[] = [];
  const waiters: (() => void)[] = [];
  createInterface({ input: proc.stdout }).on("line", (line) => {
    lines.push(JSON.parse(line) as ChildSays);
    waiters.splice(0).forEach((w) => w());
  });
  const exited = new Promise<number | null>((done) => proc.on("exit", (code) => done(code)));
  const say = async (n: number): Promise<ChildSays> => {
    while (lines.length < n) {
      const code = await Promise.race([new Promise<"line">((done) => waiters.push(() => done("line"))), exited]);
      if (code !== "line" && lines.length < n) throw new Error(`child exited ${code}: ${stderr}`);
    }
    return lines[n - 1]!;
  };
  return { proc, say, exited, stderr: () => stderr };
}

describe("compile cache: several processes building into one directory", () => {
  it(
    "concurrent builders into one directory agree and load; a process keeps the build it runs while others build newer ones",
    { timeout: 120_000 },
    async () => {
      const lazy = 'export const value = "lazy chunk";\n';
      const entryText =
        'import { VERSION } from "./version.ts";\nexport const version = VERSION;\nexport async function later() { return (await import("./lazy.ts")).value; }\n';
      const dir = project({ "version.ts": "export const VERSION = 1;\n", "lazy.ts": lazy, "entry.ts": entryText });
      const entry = join(dir, "entry.ts");
      const out = join(dir, "cache");
      try {
        // a long-running server: imported its entry from build 1, loads a chunk of it only later
        const holder = startChild(entry, out, "hold");
        expect((await holder.say(1)).version).toBe(1);
        // four servers started at once after an edit: one build, all of them run it
        writeFileSync(join(dir, "version.ts"), "export const VERSION = 2;\n");
        const builders = Array.from({ length: 4 }, () => startChild(entry, out));
        const said = await Promise.all(builders.map((b) => b.say(1)));
        expect(await Promise.all(builders.map((b) => b.exited))).toEqual([0, 0, 0, 0]);
        for (const s of said) expect(s).toEqual({ url: said[0]!.url, version: 2, lazy: "lazy chunk" });
        // two more edits, each built (here, in another process than the holder): 3 builds newer than the holder's
        for (const version of [3, 4]) {
          writeFileSync(join(dir, "version.ts"), `export const VERSION = ${version};\n`);
          await compileModules([entry], out, { keepBuilds: 3 });
        }
        holder.proc.stdin.write("go\n");
        // old code: ERR_MODULE_NOT_FOUND, build 1 was removed as one of the "older builds"
        expect(await holder.say(2)).toMatchObject({ version: 1, lazy: "lazy chunk" });
        expect(await holder.exited).toBe(0);
        // the cache as the builders left it: reused as it is, no staging or lock left behind
        const now = await compileModules([entry], out, { keepBuilds: 3 });
        const mod = (await import(now.urls[entry]!)) as { version: number; later(): Promise<string> };
        expect([mod.version, await mod.later()]).toEqual([4, "lazy chunk"]);
        expect(readdirSync(out).filter((n) => n.endsWith(".tmp") || n === "lock")).toEqual([]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});
