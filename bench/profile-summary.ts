// Summarises a .cpuprofile (Chrome/V8 format, e.g. written by TROUPE_CPU_PROFILE_DIR or node
// --cpu-prof): the functions with the most self time and the most inclusive time, in % of samples.
// Usage: npx tsx bench/profile-summary.ts <file.cpuprofile> [top=30] [name=regex ...]
// It also prints self time by owner: each npm package, node, Troupe (its compiled code), and V8's
// own entries ((garbage collector), (idle), (program)).
// With name=regex arguments it also splits the samples into those categories: a sample belongs to
// the first category (in the order given) matching any frame of its stack ("file.ts:line" names
// after source maps), else to "other"; (idle) and (garbage collector) samples are their own.
// With --within=regex only the samples with a frame matching it count, and percentages are of those.
import { existsSync, readFileSync } from "node:fs";
import { SourceMap } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber?: number };
  children?: number[];
}

export interface CpuProfileFile {
  nodes: ProfileNode[];
  samples: number[];
}

export interface ProfileRow {
  name: string;
  percent: number;
}

const sourceMaps = new Map<string, SourceMap | null>();

/** The linked source map of a compiled file (Troupe's workers run code compiled by src/loader/). */
function sourceMapOf(url: string): SourceMap | null {
  let map = sourceMaps.get(url);
  if (map === undefined) {
    map = null;
    try {
      const file = url.startsWith("file:") ? `${fileURLToPath(url)}.map` : "";
      if (file && existsSync(file)) map = new SourceMap(JSON.parse(readFileSync(file, "utf8")) as ConstructorParameters<typeof SourceMap>[0]);
    } catch {
      map = null; // no usable map: name the compiled file
    }
    sourceMaps.set(url, map);
  }
  return map;
}

/** "function file:line" of a profile frame, through the compiled file's source map when it has one
 *  (also used by bench/alloc-summary.ts and bench/call-counts.ts) */
export function frameName(n: { callFrame: ProfileNode["callFrame"] }): string {
  const { functionName, url, lineNumber, columnNumber } = n.callFrame;
  const entry = (url ? sourceMapOf(url)?.findEntry(lineNumber, columnNumber ?? 0) : undefined) as
    { originalSource?: string; originalLine?: number } | undefined;
  const [file, line] = entry?.originalSource !== undefined ? [entry.originalSource, entry.originalLine ?? 0] : [url, lineNumber];
  return `${functionName || "(anonymous)"} ${file.split("/").slice(-2).join("/")}:${line + 1}`;
}

/** The profile's nodes by id, and each node's parent. */
function treeOf(profile: CpuProfileFile): { byId: Map<number, ProfileNode>; parentOf: Map<number, number> } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parentOf = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parentOf.set(c, n.id);
  return { byId, parentOf };
}

/** Who a frame's code belongs to: an npm package by name, a node: module, or Troupe (its compiled code). */
export function ownerOf(url: string): string {
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1];
  if (pkg !== undefined && pkg !== ".cache") return pkg;
  if (url.startsWith("node:")) return "node";
  return url ? "troupe" : "(native)";
}

/** Self and inclusive time per function (a recursive function counts once per sample), and self time by owner. */
export function summariseProfile(profile: CpuProfileFile, top = 30): { self: ProfileRow[]; inclusive: ProfileRow[]; byOwner: ProfileRow[]; samples: number } {
  const { byId, parentOf } = treeOf(profile);
  const hits = new Map<number, number>();
  for (const id of profile.samples) hits.set(id, (hits.get(id) ?? 0) + 1);
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  const byOwner = new Map<string, number>();
  for (const [id, count] of hits) {
    const node = byId.get(id);
    if (!node) continue;
    self.set(frameName(node), (self.get(frameName(node)) ?? 0) + count);
    const { url, functionName } = node.callFrame;
    const owner = !url && functionName.startsWith("(") ? functionName : ownerOf(url);
    byOwner.set(owner, (byOwner.get(owner) ?? 0) + count);
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parentOf.get(cur)) {
      const name = frameName(byId.get(cur)!);
      if (seen.has(name)) continue;
      seen.add(name);
      inclusive.set(name, (inclusive.get(name) ?? 0) + count);
    }
  }
  const total = profile.samples.length || 1;
  const rows = (m: Map<string, number>, n = top) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([name, count]) => ({ name, percent: (100 * count) / total }));
  // owners are few: all of them
  return { self: rows(self), inclusive: rows(inclusive), byOwner: rows(byOwner, byOwner.size), samples: profile.samples.length };
}

/** The profile with only the samples that have a frame matching `pattern` on their stack. */
export function profileWithin(profile: CpuProfileFile, pattern: RegExp): CpuProfileFile {
  const { byId, parentOf } = treeOf(profile);
  const matches = new Map<number, boolean>();
  const matchesAt = (id: number): boolean => {
    let found = matches.get(id);
    if (found === undefined) {
      const parent = parentOf.get(id);
      found = pattern.test(frameName(byId.get(id)!)) || (parent !== undefined && matchesAt(parent));
      matches.set(id, found);
    }
    return found;
  };
  return { nodes: profile.nodes, samples: profile.samples.filter(matchesAt) };
}

/** Samples per category (see the usage note at the top), largest first. */
export function categoriseProfile(profile: CpuProfileFile, categories: { name: string; pattern: RegExp }[]): ProfileRow[] {
  const { byId, parentOf } = treeOf(profile);
  const categoryOfNode = new Map<number, string>();
  const categoryOf = (id: number): string => {
    let found = categoryOfNode.get(id);
    if (found !== undefined) return found;
    const stack: string[] = [];
    for (let cur: number | undefined = id; cur !== undefined; cur = parentOf.get(cur)) stack.push(frameName(byId.get(cur)!));
    found = /^\((idle|garbage collector)\)/.exec(stack[0])?.[0] ?? categories.find((c) => stack.some((f) => c.pattern.test(f)))?.name ?? "other";
    categoryOfNode.set(id, found);
    return found;
  };
  const counts = new Map<string, number>();
  for (const id of profile.samples) {
    const category = categoryOf(id);
    counts.set(category, (counts.get(category) ?? 0) + 1);
  }
  const total = profile.samples.length || 1;
  return [...counts].sort((a, b) => b[1] - a[1]).map(([name, n]) => ({ name, percent: (100 * n) / total }));
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const args = process.argv.slice(2);
  const within = args.find((a) => a.startsWith("--within="));
  const [file, top, ...categoryArgs] = args.filter((a) => a !== within);
  if (!file) {
    console.error("usage: npx tsx bench/profile-summary.ts <file.cpuprofile> [top=30] [name=regex ...] [--within=regex]");
    process.exit(2);
  }
  const whole = JSON.parse(readFileSync(file, "utf8")) as CpuProfileFile;
  const profile = within ? profileWithin(whole, new RegExp(within.slice("--within=".length))) : whole;
  const s = summariseProfile(profile, Number(top ?? 30));
  const print = (title: string, rows: ProfileRow[]) =>
    console.log(`${title}\n${rows.map((r) => `${r.percent.toFixed(1).padStart(5)}%  ${r.name}`).join("\n")}\n`);
  console.log(`${s.samples} samples\n`);
  print("self time by owner", s.byOwner);
  print("self time", s.self);
  print("inclusive time", s.inclusive);
  if (categoryArgs.length > 0) {
    const categories = categoryArgs.map((arg) => {
      const at = arg.indexOf("=");
      if (at < 1) throw new Error(`category "${arg}": expected name=regex`);
      return { name: arg.slice(0, at), pattern: new RegExp(arg.slice(at + 1)) };
    });
    print("categories", categoriseProfile(profile, categories));
  }
}
