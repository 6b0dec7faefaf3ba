// Server memory from /proc (Linux): VmRSS of one process or of it plus all its descendants,
// sampled in the background so the report can show the end value and the peak.
import fs from "node:fs";

/** VmRSS in KiB, or null when the process is gone or /proc is unavailable. */
export function readRssKiB(pid: number): number | null {
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/status`, "latin1");
  } catch {
    return null;
  }
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(text);
  return m === null ? 0 : Number(m[1]); // kernel threads have no VmRSS line
}

/**
 * RssAnon / RssFile of one process in MiB: heap and stacks versus file-backed pages (for a
 * database server mostly its memory-mapped data files, which the kernel can drop under pressure).
 */
export function readRssParts(pid: number): { anonMb: number; fileMb: number } | null {
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/status`, "latin1");
  } catch {
    return null;
  }
  const kib = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)\\s+kB`, "m").exec(text)?.[1] ?? 0);
  return { anonMb: kib("RssAnon") / 1024, fileMb: kib("RssFile") / 1024 };
}

/** Every live descendant of `root` (children, grandchildren, …), from the ppid field of /proc/<pid>/stat. */
export function descendants(root: number): number[] {
  const children = new Map<number, number[]>();
  let entries: string[];
  try {
    entries = fs.readdirSync("/proc");
  } catch {
    return [];
  }
  for (const name of entries) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/${name}/stat`, "latin1");
    } catch {
      continue; // exited while scanning
    }
    // "pid (comm) state ppid …": comm may hold spaces and parens, so split after the last ")".
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const ppid = Number(fields[1]);
    const list = children.get(ppid);
    if (list === undefined) children.set(ppid, [Number(name)]);
    else list.push(Number(name));
  }
  const out: number[] = [];
  const stack = [...(children.get(root) ?? [])];
  while (stack.length > 0) {
    const pid = stack.pop() as number;
    out.push(pid);
    stack.push(...(children.get(pid) ?? []));
  }
  return out;
}

export interface RssReading {
  mb: number;
  processes: number;
}

/** RSS of `pid` (and, with `tree`, its descendants) in MiB; null when `pid` is not running. */
export function readRss(pid: number, tree: boolean): RssReading | null {
  const own = readRssKiB(pid);
  if (own === null) return null;
  let kib = own;
  let processes = 1;
  if (tree) {
    for (const child of descendants(pid)) {
      const k = readRssKiB(child);
      if (k !== null) {
        kib += k;
        processes++;
      }
    }
  }
  return { mb: kib / 1024, processes };
}

export class RssSampler {
  private peakMb = 0;
  private readonly timer: NodeJS.Timeout;
  readonly start: RssReading | null;

  constructor(
    private readonly pid: number,
    private readonly tree: boolean,
    intervalMs = 500,
  ) {
    this.start = this.sample();
    this.timer = setInterval(() => this.sample(), intervalMs);
    this.timer.unref();
  }

  sample(): RssReading | null {
    const r = readRss(this.pid, this.tree);
    if (r !== null && r.mb > this.peakMb) this.peakMb = r.mb;
    return r;
  }

  get peak(): number {
    return this.peakMb;
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
