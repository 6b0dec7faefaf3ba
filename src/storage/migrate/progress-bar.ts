// The migrate command's progress on stderr: on a terminal, one line redrawn in place
// ("threads  1234/5000 [#####.....] 24%"); otherwise (a log, CI) a line each time another `every`
// records of a family are done, and one when a family ends.
const WIDTH = 30;

export class ProgressBar {
  private family = "";
  private lastLogged = 0;
  private readonly tty: boolean;

  constructor(
    private readonly out: NodeJS.WriteStream,
    private readonly every: number,
  ) {
    this.tty = out.isTTY === true;
  }

  update(family: string, done: number, total: number): void {
    if (family !== this.family) {
      if (this.tty && this.family !== "") this.out.write("\n");
      this.family = family;
      this.lastLogged = -1;
    }
    if (this.tty) {
      this.out.write(`\r${this.line(done, total)}`);
      return;
    }
    if (this.lastLogged < 0 || done - this.lastLogged >= this.every || done >= total) {
      if (done === this.lastLogged) return;
      this.out.write(`${this.line(done, total)}\n`);
      this.lastLogged = done;
    }
  }

  end(): void {
    if (this.tty && this.family !== "") this.out.write("\n");
  }

  private line(done: number, total: number): string {
    const share = total > 0 ? Math.min(1, done / total) : 1;
    const filled = Math.round(share * WIDTH);
    return `${this.family.padEnd(10)} ${String(done).padStart(8)}/${total} [${"#".repeat(filled)}${".".repeat(WIDTH - filled)}] ${Math.round(share * 100)}%`;
  }
}
