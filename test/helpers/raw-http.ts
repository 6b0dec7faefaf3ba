// Raw HTTP/1.x over a plain TCP socket, for requests fetch cannot send (HTTP/1.0, absolute-form
// targets, duplicate headers, pipelining, a body that never comes) and to see what the server
// sends and when, including nothing at all.
import net from "node:net";

export interface RawExchange {
  /** everything the server sent, as latin1 text */
  text: string;
  /** the server closed the connection (FIN or reset) before we gave up */
  closed: boolean;
  /** ms from the first byte written to the server's close (or to giving up) */
  ms: number;
}

/**
 * Writes `data` (then each of `more` after `gapMs`), and collects what comes back until the server
 * closes, `until` matches the text so far, or `timeoutMs` passes.
 */
export function rawExchange(
  url: string,
  data: string | Buffer,
  opts: { timeoutMs?: number; until?: RegExp; more?: (string | Buffer)[]; gapMs?: number } = {},
): Promise<RawExchange> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname);
    let text = "";
    const started = Date.now();
    let done = false;
    const finish = (closed: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ text, closed, ms: Date.now() - started });
    };
    const timer = setTimeout(() => finish(false), opts.timeoutMs ?? 10_000);
    socket.on("data", (d: Buffer) => {
      text += d.toString("latin1");
      if (opts.until?.test(text)) finish(false);
    });
    socket.on("error", () => finish(true));
    socket.on("close", () => finish(true));
    socket.write(data);
    let delay = 0;
    for (const chunk of opts.more ?? []) {
      delay += opts.gapMs ?? 50;
      setTimeout(() => !done && socket.write(chunk), delay);
    }
  });
}

/** Status code of the first (non-1xx) response in a raw exchange, or undefined. */
export function finalStatus(text: string): number | undefined {
  for (const m of text.matchAll(/HTTP\/1\.[01] (\d{3})/g)) {
    const code = Number(m[1]);
    if (code >= 200) return code;
  }
  return undefined;
}

/** The body of the first final response (after the blank line), for JSON checks. */
export function firstBody(text: string): string {
  const final = text.search(/HTTP\/1\.[01] [2-5]\d\d/);
  const head = text.indexOf("\r\n\r\n", final);
  const length = /content-length: (\d+)/i.exec(text.slice(final, head));
  const start = head + 4;
  return length ? text.slice(start, start + Number(length[1])) : text.slice(start);
}
