// `--url A,B,C`: one client per server, each request sent to the next server in turn, so a
// closed loop spreads its load evenly over the nodes of a cluster (as a round-robin balancer would).
import type { BenchResponse, HttpClient, PreparedRequest, RequestOptions, TransportError } from "./types.ts";

/** A request serialised once for each server (the Host header and path prefix differ). */
interface SpreadRequest extends PreparedRequest {
  readonly perServer: readonly PreparedRequest[];
}

export class RoundRobinClient implements HttpClient {
  private turn = 0;

  constructor(private readonly clients: readonly HttpClient[]) {
    if (clients.length === 0) throw new Error("RoundRobinClient needs at least one client");
  }

  prepare(method: string, path: string, body?: unknown): PreparedRequest {
    const perServer = this.clients.map((c) => c.prepare(method, path, body));
    const spread: SpreadRequest = { ...perServer[0], perServer };
    return spread;
  }

  request(req: PreparedRequest, opts?: RequestOptions): Promise<BenchResponse> {
    const i = this.turn;
    this.turn = (i + 1) % this.clients.length;
    const own = (req as Partial<SpreadRequest>).perServer?.[i] ?? req;
    return this.clients[i].request(own, opts);
  }

  close(reason?: TransportError): void {
    for (const c of this.clients) c.close(reason);
  }
}
