// The same HttpClient on node:http with a keep-alive Agent: slower per request than the raw
// client, but the reference implementation to cross-check it against (`--client node`).
import http from "node:http";
import { prepareRequest, TransportError, type BenchResponse, type ClientConfig, type HttpClient, type PreparedRequest, type RequestOptions } from "./types.ts";

export class NodeHttpClient implements HttpClient {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: Infinity, scheduling: "lifo" });
  private readonly inFlight = new Set<http.ClientRequest>();

  constructor(private readonly config: ClientConfig) {}

  prepare(method: string, path: string, body?: unknown): PreparedRequest {
    return prepareRequest(this.config.baseUrl, method, path, body);
  }

  request(req: PreparedRequest, opts?: RequestOptions): Promise<BenchResponse> {
    const { baseUrl, idleTimeoutMs } = this.config;
    return new Promise<BenchResponse>((resolve, reject) => {
      const headers: Record<string, string> = { "user-agent": "troupe-bench", accept: "*/*" };
      if (req.body !== null) {
        headers["content-type"] = "application/json";
        headers["content-length"] = String(req.body.length);
      }
      const r = http.request(
        {
          agent: this.agent,
          host: baseUrl.hostname.replace(/^\[|\]$/g, ""),
          port: baseUrl.port === "" ? 80 : Number(baseUrl.port),
          method: req.method,
          path: req.path,
          headers,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (chunk: Buffer) => {
            opts?.onChunk?.(chunk);
            if (opts?.discardBody !== true) chunks.push(chunk);
          });
          res.on("end", () => {
            const flat: Record<string, string> = {};
            for (const [k, v] of Object.entries(res.headers)) {
              if (v !== undefined) flat[k] = Array.isArray(v) ? v[v.length - 1] : v;
            }
            resolve({ status: res.statusCode ?? 0, headers: flat, body: Buffer.concat(chunks) });
          });
          res.on("error", (err: NodeJS.ErrnoException) => reject(new TransportError(err.code ?? "socket", err.message)));
        },
      );
      r.setTimeout(idleTimeoutMs, () => {
        r.destroy(new TransportError("timeout", `no data from server for ${idleTimeoutMs} ms`));
      });
      r.on("error", (err: NodeJS.ErrnoException) => {
        reject(err instanceof TransportError ? err : new TransportError(err.code ?? "socket", err.message));
      });
      this.inFlight.add(r);
      r.on("close", () => this.inFlight.delete(r));
      r.end(req.body ?? undefined);
    });
  }

  close(reason = new TransportError("closed", "client closed")): void {
    for (const r of this.inFlight) r.destroy(reason);
    this.inFlight.clear();
    this.agent.destroy();
  }
}
