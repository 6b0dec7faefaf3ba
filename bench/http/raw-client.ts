// Minimal keep-alive HTTP/1.1 client over net.Socket. Much cheaper per request than node:http,
// so a single client core can push a fast server (the `/ok` scenario) instead of being the limit.
import net from "node:net";
import { performance } from "node:perf_hooks";
import { ProtocolError, ResponseParser, type ParsedHead, type ParserSink } from "./response-parser.ts";
import { prepareRequest, TransportError, type BenchResponse, type ClientConfig, type HttpClient, type PreparedRequest, type RequestOptions } from "./types.ts";

/** Idle sockets older than this are dropped instead of reused, to dodge server keep-alive timeouts (Node's is 5 s). */
const MAX_IDLE_REUSE_MS = 2000;

interface InFlight {
  resolve(res: BenchResponse): void;
  reject(err: Error): void;
  opts: RequestOptions | undefined;
  head: ParsedHead | null;
  chunks: Buffer[];
}

class RawConnection implements ParserSink {
  readonly socket: net.Socket;
  private readonly parser = new ResponseParser(this);
  private current: InFlight | null = null;
  dead = false;
  idleSince = 0;

  constructor(
    config: ClientConfig,
    private readonly release: (conn: RawConnection, reusable: boolean) => void,
  ) {
    const port = config.baseUrl.port === "" ? 80 : Number(config.baseUrl.port);
    const host = config.baseUrl.hostname.replace(/^\[|\]$/g, "");
    this.socket = net.connect({ host, port, noDelay: true });
    this.socket.setTimeout(config.idleTimeoutMs);
    this.socket.on("data", (data: Buffer) => {
      try {
        this.parser.execute(data);
      } catch (err) {
        this.fail(err instanceof ProtocolError ? new TransportError("protocol", err.message) : toError(err));
      }
    });
    this.socket.on("end", () => {
      try {
        this.parser.finish();
        this.fail(new TransportError("closed", "server closed the connection"));
      } catch (err) {
        this.fail(new TransportError("closed", (err as Error).message));
      }
    });
    this.socket.on("timeout", () => {
      this.fail(new TransportError("timeout", `no data from server for ${config.idleTimeoutMs} ms`));
    });
    this.socket.on("error", (err: NodeJS.ErrnoException) => {
      this.fail(new TransportError(err.code ?? "socket", err.message));
    });
    this.socket.on("close", () => {
      this.fail(new TransportError("closed", "connection closed"));
    });
  }

  send(req: PreparedRequest, opts: RequestOptions | undefined): Promise<BenchResponse> {
    return new Promise<BenchResponse>((resolve, reject) => {
      this.current = { resolve, reject, opts, head: null, chunks: [] };
      this.parser.expect(req.method === "HEAD");
      this.socket.write(req.wire);
    });
  }

  onHead(head: ParsedHead): void {
    if (this.current !== null) this.current.head = head;
  }

  onBody(chunk: Buffer): void {
    const cur = this.current;
    if (cur === null) return;
    cur.opts?.onChunk?.(chunk);
    if (cur.opts?.discardBody !== true) cur.chunks.push(chunk);
  }

  onEnd(): void {
    const cur = this.current;
    this.current = null;
    if (cur === null || cur.head === null) return;
    const body = cur.chunks.length === 1 ? cur.chunks[0] : Buffer.concat(cur.chunks);
    const reusable = cur.head.keepAlive && !this.dead;
    cur.resolve({ status: cur.head.status, headers: cur.head.headers, body });
    this.release(this, reusable);
  }

  /** Tears the socket down and rejects the request in flight, if any. */
  fail(err: Error): void {
    if (!this.dead) {
      this.dead = true;
      this.socket.destroy();
      this.release(this, false);
    }
    const cur = this.current;
    this.current = null;
    cur?.reject(err);
  }
}

function toError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

export class RawHttpClient implements HttpClient {
  private readonly idle: RawConnection[] = [];
  private readonly all = new Set<RawConnection>();

  constructor(private readonly config: ClientConfig) {}

  prepare(method: string, path: string, body?: unknown): PreparedRequest {
    return prepareRequest(this.config.baseUrl, method, path, body);
  }

  request(req: PreparedRequest, opts?: RequestOptions): Promise<BenchResponse> {
    return this.acquire().send(req, opts);
  }

  close(reason = new TransportError("closed", "client closed")): void {
    for (const conn of [...this.all]) conn.fail(reason);
    this.idle.length = 0;
  }

  private acquire(): RawConnection {
    while (this.idle.length > 0) {
      const conn = this.idle.pop() as RawConnection;
      if (!conn.dead && performance.now() - conn.idleSince < MAX_IDLE_REUSE_MS) return conn;
      conn.fail(new TransportError("closed", "idle connection retired"));
    }
    const conn = new RawConnection(this.config, (c, reusable) => this.release(c, reusable));
    this.all.add(conn);
    return conn;
  }

  private release(conn: RawConnection, reusable: boolean): void {
    if (reusable) {
      conn.idleSince = performance.now();
      this.idle.push(conn);
      return;
    }
    this.all.delete(conn);
    if (!conn.dead) conn.fail(new TransportError("closed", "server asked to close"));
    const i = this.idle.indexOf(conn);
    if (i >= 0) this.idle.splice(i, 1);
  }
}
