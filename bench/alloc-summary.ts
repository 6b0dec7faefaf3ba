// Summarises a .heapprofile written by TROUPE_HEAP_PROFILE_DIR (every allocation sampled, also what GC
// collected since): the functions that allocate the most bytes, by their own frame ("function
// file:line" after source maps), and the share of each package or Troupe itself.
// Usage: npx tsx bench/alloc-summary.ts <file.heapprofile> [top=30] [runs]
// With `runs` (how many runs the server did while it sampled) the figures are KB per run, else %.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { frameName, ownerOf } from "./profile-summary.ts";

interface HeapNode {
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber?: number };
  selfSize: number;
  children?: HeapNode[];
}

export interface AllocRow {
  name: string;
  bytes: number;
}

export function summariseAllocations(head: HeapNode, top = 30): { total: number; byFunction: AllocRow[]; byOwner: AllocRow[] } {
  const byFunction = new Map<string, number>();
  const byOwner = new Map<string, number>();
  let total = 0;
  // a native frame (no url) allocates on behalf of the nearest caller with code
  const walk = (n: HeapNode, callerUrl: string): void => {
    const url = n.callFrame.url || callerUrl;
    if (n.selfSize > 0) {
      total += n.selfSize;
      const name = frameName(n);
      byFunction.set(name, (byFunction.get(name) ?? 0) + n.selfSize);
      const owner = ownerOf(url);
      byOwner.set(owner, (byOwner.get(owner) ?? 0) + n.selfSize);
    }
    for (const c of n.children ?? []) walk(c, url);
  };
  walk(head, "");
  const rows = (m: Map<string, number>, n: number) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([name, bytes]) => ({ name, bytes }));
  return { total, byFunction: rows(byFunction, top), byOwner: rows(byOwner, 15) };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const [file, top, runs] = process.argv.slice(2);
  if (!file) {
    console.error("usage: npx tsx bench/alloc-summary.ts <file.heapprofile> [top=30] [runs]");
    process.exit(2);
  }
  const s = summariseAllocations((JSON.parse(readFileSync(file, "utf8")) as { head: HeapNode }).head, Number(top ?? 30));
  const fmt = (bytes: number) =>
    runs ? `${(bytes / Number(runs) / 1024).toFixed(1).padStart(7)} KB/run` : `${((100 * bytes) / (s.total || 1)).toFixed(1).padStart(5)}%`;
  console.log(`allocated ${fmt(s.total)}\n\nby owner\n${s.byOwner.map((r) => `${fmt(r.bytes)}  ${r.name}`).join("\n")}\n`);
  console.log(`by function\n${s.byFunction.map((r) => `${fmt(r.bytes)}  ${r.name}`).join("\n")}`);
}
