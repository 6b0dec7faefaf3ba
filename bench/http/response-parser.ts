// Incremental HTTP/1.1 response parser for the raw client: head, then a Content-Length,
// chunked or read-until-close body. One response at a time (the client never pipelines).

export interface ParsedHead {
  readonly status: number;
  readonly headers: Record<string, string>;
  /** False when the server asked to close (`Connection: close`, or HTTP/1.0 without keep-alive). */
  readonly keepAlive: boolean;
}

export interface ParserSink {
  onHead(head: ParsedHead): void;
  onBody(chunk: Buffer): void;
  onEnd(): void;
}

type State = "head" | "length" | "chunked" | "until-close" | "idle";
type ChunkPhase = "size" | "data" | "data-crlf" | "trailer";

const MAX_HEAD_BYTES = 64 * 1024;
const MAX_LINE_BYTES = 4096;

export class ProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ProtocolError";
  }
}

export class ResponseParser {
  private state: State = "idle";
  private pendingHead: Buffer | null = null;
  private remaining = 0;
  private chunkPhase: ChunkPhase = "size";
  private lineBuf = "";
  private noBody = false;

  constructor(private readonly sink: ParserSink) {}

  /** Arms the parser for the next response; `noBody` for HEAD requests. */
  expect(noBody = false): void {
    this.state = "head";
    this.pendingHead = null;
    this.lineBuf = "";
    this.noBody = noBody;
  }

  get busy(): boolean {
    return this.state !== "idle";
  }

  execute(data: Buffer): void {
    let buf = data;
    let off = 0;
    while (off < buf.length) {
      switch (this.state) {
        case "idle":
          throw new ProtocolError(`unexpected ${buf.length - off} bytes after the response`);
        case "head": {
          const joined = this.pendingHead === null ? buf.subarray(off) : Buffer.concat([this.pendingHead, buf.subarray(off)]);
          const end = joined.indexOf("\r\n\r\n", 0, "latin1");
          if (end < 0) {
            if (joined.length > MAX_HEAD_BYTES) throw new ProtocolError("response head too large");
            this.pendingHead = joined;
            return;
          }
          this.pendingHead = null;
          buf = joined;
          off = end + 4;
          this.beginBody(this.parseHead(joined.toString("latin1", 0, end)));
          break;
        }
        case "length": {
          const n = Math.min(this.remaining, buf.length - off);
          this.sink.onBody(buf.subarray(off, off + n));
          off += n;
          this.remaining -= n;
          if (this.remaining === 0) this.finishResponse();
          break;
        }
        case "until-close":
          this.sink.onBody(buf.subarray(off));
          off = buf.length;
          break;
        case "chunked":
          off = this.chunked(buf, off);
          break;
      }
    }
  }

  /** The socket ended: completes a read-until-close body, else reports a truncated response. */
  finish(): void {
    if (this.state === "until-close") {
      this.finishResponse();
      return;
    }
    if (this.state !== "idle") throw new ProtocolError(`connection closed mid-response (${this.state})`);
  }

  /** Hand-rolled (no split/regex): this runs once per response in the hottest loop. */
  private parseHead(text: string): ParsedHead {
    if (!text.startsWith("HTTP/1.") || text.length < 12 || text.charCodeAt(8) !== 32) {
      throw new ProtocolError(`bad status line: ${text.slice(0, 80)}`);
    }
    const status = Number(text.slice(9, 12));
    if (!Number.isInteger(status)) throw new ProtocolError(`bad status line: ${text.slice(0, 80)}`);
    const headers: Record<string, string> = {};
    let pos = text.indexOf("\r\n");
    while (pos >= 0) {
      const start = pos + 2;
      const eol = text.indexOf("\r\n", start);
      const end = eol < 0 ? text.length : eol;
      const colon = text.indexOf(":", start);
      if (colon > start && colon < end) {
        headers[text.slice(start, colon).trim().toLowerCase()] = text.slice(colon + 1, end).trim();
      }
      pos = eol;
    }
    const conn = headers["connection"];
    const http11 = text.charCodeAt(7) === 49; // "1" in HTTP/1.1
    const keepAlive = conn === undefined ? http11 : http11 ? !/close/i.test(conn) : /keep-alive/i.test(conn);
    return { status, headers, keepAlive };
  }

  private beginBody(head: ParsedHead): void {
    if (head.status >= 100 && head.status < 200 && head.status !== 101) {
      this.state = "head"; // informational response: the real one follows
      return;
    }
    this.sink.onHead(head);
    if (this.noBody || head.status === 204 || head.status === 304) {
      this.finishResponse();
      return;
    }
    const te = head.headers["transfer-encoding"];
    if (te !== undefined && te.toLowerCase().includes("chunked")) {
      this.state = "chunked";
      this.chunkPhase = "size";
      this.lineBuf = "";
      return;
    }
    const cl = head.headers["content-length"];
    if (cl !== undefined) {
      const n = Number(cl);
      if (!Number.isInteger(n) || n < 0) throw new ProtocolError(`bad content-length: ${cl}`);
      if (n === 0) {
        this.finishResponse();
        return;
      }
      this.state = "length";
      this.remaining = n;
      return;
    }
    this.state = "until-close";
  }

  private chunked(buf: Buffer, start: number): number {
    let off = start;
    while (off < buf.length) {
      if (this.chunkPhase === "data") {
        const n = Math.min(this.remaining, buf.length - off);
        this.sink.onBody(buf.subarray(off, off + n));
        off += n;
        this.remaining -= n;
        if (this.remaining === 0) this.chunkPhase = "data-crlf";
        continue;
      }
      const nl = buf.indexOf(10, off);
      if (nl < 0) {
        this.lineBuf += buf.toString("latin1", off);
        if (this.lineBuf.length > MAX_LINE_BYTES) throw new ProtocolError("chunk framing line too long");
        return buf.length;
      }
      let line = this.lineBuf + buf.toString("latin1", off, nl);
      this.lineBuf = "";
      off = nl + 1;
      if (line.endsWith("\r")) line = line.slice(0, -1);
      if (this.chunkPhase === "size") {
        const semi = line.indexOf(";");
        const size = parseInt(semi < 0 ? line : line.slice(0, semi), 16);
        if (!Number.isFinite(size) || size < 0) throw new ProtocolError(`bad chunk size: ${line.slice(0, 40)}`);
        if (size === 0) {
          this.chunkPhase = "trailer";
        } else {
          this.remaining = size;
          this.chunkPhase = "data";
        }
      } else if (this.chunkPhase === "data-crlf") {
        if (line !== "") throw new ProtocolError("missing CRLF after chunk data");
        this.chunkPhase = "size";
      } else if (line === "") {
        this.finishResponse(); // end of trailers
        return off;
      }
    }
    return off;
  }

  private finishResponse(): void {
    this.state = "idle";
    this.sink.onEnd();
  }
}
