// Picks the HTTP client implementation named by `--client` (raw sockets by default); several
// server URLs (`--url A,B`) get one client each behind a round-robin client.
import { NodeHttpClient } from "./node-client.ts";
import { RawHttpClient } from "./raw-client.ts";
import { RoundRobinClient } from "./round-robin-client.ts";
import type { ClientConfig, ClientKind, HttpClient } from "./types.ts";

export function createClient(kind: ClientKind, config: ClientConfig, urls: readonly URL[] = [config.baseUrl]): HttpClient {
  const one = (baseUrl: URL): HttpClient => (kind === "node" ? new NodeHttpClient({ ...config, baseUrl }) : new RawHttpClient({ ...config, baseUrl }));
  return urls.length <= 1 ? one(urls[0] ?? config.baseUrl) : new RoundRobinClient(urls.map(one));
}
