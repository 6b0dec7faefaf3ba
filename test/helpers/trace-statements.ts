// Reads a server's TROUPE_TRACE file: which statements its database connections sent.
import { readFileSync } from "node:fs";

/** The statements sent on the server's connections (the trace's `pg.send` lines) from line `from` on, by name. */
export function statementsSince(file: string, from: number): { lines: number; sent: Map<string, number> } {
  const lines = readFileSync(file, "utf8").split("\n");
  const sent = new Map<string, number>();
  for (const line of lines.slice(from)) {
    const m = / pg\.send #\d+ c\d+ (.*)$/.exec(line);
    if (m) sent.set(m[1], (sent.get(m[1]) ?? 0) + 1);
  }
  return { lines: lines.length - 1, sent };
}
