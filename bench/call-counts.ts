// Compares two .callcounts files written by TROUPE_CALL_COUNTS_DIR: calls per run of each function,
// the run count taken from how often a function called once per run ran (default buildRunConfig, a
// synchronous one: an async function counts once per resumption, not per call). Tells "the same
// code called more often" from "the same calls taking longer" when two CPU profiles differ (e.g.
// the two storage backends).
// Usage: npx tsx bench/call-counts.ts <a.callcounts> <b.callcounts> [top=40] [--only=regex] [--per-run=name]
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

interface ScriptCoverage {
  url: string;
  functions: { functionName: string; ranges: { startOffset: number; count: number }[] }[];
}

/** Calls by function ("name file@offset": one entry per function even where names repeat). */
export function callsByFunction(scripts: ScriptCoverage[]): Map<string, number> {
  const calls = new Map<string, number>();
  for (const s of scripts)
    for (const f of s.functions) {
      const first = f.ranges[0];
      if (!first) continue;
      const key = `${f.functionName || "(anonymous)"} ${s.url.split("/").slice(-2).join("/")}@${first.startOffset}`;
      calls.set(key, (calls.get(key) ?? 0) + first.count);
    }
  return calls;
}

export function compareCallCounts(
  a: ScriptCoverage[],
  b: ScriptCoverage[],
  opts: { perRun?: string; only?: RegExp; top?: number } = {},
): { runs: [number, number]; rows: { name: string; a: number; b: number }[] } {
  const perRun = opts.perRun ?? "buildRunConfig";
  const ca = callsByFunction(a);
  const cb = callsByFunction(b);
  const runsOf = (c: Map<string, number>) => [...c].filter(([k]) => k.startsWith(`${perRun} `)).reduce((sum, [, n]) => sum + n, 0);
  const runs: [number, number] = [runsOf(ca), runsOf(cb)];
  if (runs[0] === 0 || runs[1] === 0) throw new Error(`no calls of ${perRun} in one of the files: pass --per-run=<a function called once per run>`);
  const names = [...new Set([...ca.keys(), ...cb.keys()])].filter((k) => !opts.only || opts.only.test(k));
  const rows = names.map((name) => ({ name, a: (ca.get(name) ?? 0) / runs[0], b: (cb.get(name) ?? 0) / runs[1] }));
  rows.sort((x, y) => Math.abs(y.b - y.a) - Math.abs(x.b - x.a) || x.name.localeCompare(y.name));
  return { runs, rows: rows.slice(0, opts.top ?? 40) };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const args = process.argv.slice(2);
  const flag = (name: string) => args.find((x) => x.startsWith(`--${name}=`))?.slice(name.length + 3);
  const [fa, fb, top] = args.filter((x) => !x.startsWith("--"));
  if (!fa || !fb) {
    console.error("usage: npx tsx bench/call-counts.ts <a.callcounts> <b.callcounts> [top=40] [--only=regex] [--per-run=name]");
    process.exit(2);
  }
  const load = (f: string) => JSON.parse(readFileSync(f, "utf8")) as ScriptCoverage[];
  const only = flag("only");
  const r = compareCallCounts(load(fa), load(fb), { perRun: flag("per-run"), only: only ? new RegExp(only) : undefined, top: Number(top ?? 40) });
  console.log(`runs: ${r.runs[0]} / ${r.runs[1]}\ncalls per run: a  b  function`);
  for (const row of r.rows) console.log(`${row.a.toFixed(2).padStart(9)} ${row.b.toFixed(2).padStart(9)}  ${row.name}`);
}
