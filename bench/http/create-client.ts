// Picks the HTTP client implementation named by `--client` (raw sockets by default).
import { NodeHttpClient } from "./node-client.ts";
import { RawHttpClient } from "./raw-client.ts";
import type { ClientConfig, ClientKind, HttpClient } from "./types.ts";

export function createClient(kind: ClientKind, config: ClientConfig): HttpClient {
  return kind === "node" ? new NodeHttpClient(config) : new RawHttpClient(config);
}
