// Reads a TROUPE_TRACE file (a server run with TROUPE_TRACE=<file> under `troupe-bench --only
// wait-c1`) and prints, for the POST /threads + runs/wait iterations in it, the median time
// between the marks of the runs/wait request, and one whole iteration line by line (relative ms,
// gap to the previous line, thread, event).
//
//   npx tsx bench/trace-timeline.ts TRACE_FILE [ITERATION, default -20: the 20th from the end]
import { readFileSync } from "node:fs";

interface Line {
  t: number;
  thread: string;
  what: string;
}

const [file, which = "-20"] = process.argv.slice(2);
if (file === undefined) {
  console.error("usage: trace-timeline.ts TRACE_FILE [ITERATION]");
  process.exit(2);
}
const lines: Line[] = readFileSync(file, "utf8")
  .split("\n")
  .filter((l) => /^\d/.test(l))
  .map((l) => {
    const [t, thread, ...what] = l.split(" ");
    return { t: Number(t), thread, what: what.join(" ") };
  })
  .sort((a, b) => a.t - b.t);

const MARKS = [
  "http.in POST /threads/",
  "pool.post run.create",
  "actor.create.issue",
  "actor.run.start",
  "actor.create.committed",
  "actor.run.executed",
  "actor.finish.issue",
  "actor.finish.committed",
  "pool.run.done",
  "http.out deferred",
];
const markOf = (what: string): string | undefined =>
  /^pool\.post \d+ run\.create/.test(what) ? "pool.post run.create" : MARKS.find((m) => what.startsWith(m));
const iterations: Map<string, number>[] = [];
let current: Map<string, number> | undefined;
for (const l of lines) {
  const mark = markOf(l.what);
  if (mark === undefined) continue;
  if (mark === MARKS[0]) iterations.push((current = new Map()));
  if (current !== undefined && !current.has(mark)) current.set(mark, l.t);
}
// (an iteration answered; a mark a server version does not have is left out)
const complete = iterations.filter((it) => it.has(MARKS.at(-1)!)).slice(-60);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(`${complete.length} answered iterations (the last 60 at most); medians from the request's arrival:`);
for (const m of MARKS) {
  const at = complete.filter((it) => it.has(m)).map((it) => it.get(m)! - it.get(MARKS[0])!);
  if (at.length > 0) console.log(`  ${m.padEnd(24)} ${median(at).toFixed(2)} ms`);
}

const starts = lines.flatMap((l, i) => (l.what === "http.in POST /threads" ? [i] : []));
const k = starts.length + Number(which);
if (k < 0 || k >= starts.length) process.exit(0);
console.log(`\niteration ${k + 1} of ${starts.length}:`);
const from = starts[k];
const to = starts[k + 1] ?? lines.length;
let prev = lines[from].t;
for (const l of lines.slice(from, to)) {
  console.log(`${(l.t - lines[from].t).toFixed(2).padStart(8)} +${(l.t - prev).toFixed(2).padStart(6)} ${l.thread.padEnd(4)} ${l.what}`);
  prev = l.t;
}
