// Keeps the last lines a child process printed, so a failed build or a server that died can be
// explained on the revision (`status_message`) without storing whole logs.
export class OutputTail {
  private lines: string[] = [];
  private partial = "";

  constructor(private readonly maxLines = 20) {}

  push(chunk: Buffer | string): void {
    const parts = (this.partial + chunk.toString()).split("\n");
    this.partial = parts.pop() ?? "";
    for (const l of parts) {
      const line = l.trimEnd();
      if (line) this.lines.push(line);
    }
    if (this.lines.length > this.maxLines) this.lines = this.lines.slice(-this.maxLines);
  }

  /** The kept lines, plus the unterminated last one; `max` limits to the newest ones. */
  text(max = this.maxLines): string {
    const all = this.partial.trim() ? [...this.lines, this.partial.trimEnd()] : this.lines;
    return all.slice(-max).join("\n");
  }
}
