// Port allocation for deployment servers: once per deployment (persisted on the record) so its URL
// stays the same across revisions and control-plane restarts.
import { createServer } from "node:net";

/** Asks the OS for a free port on `host` (bind port 0, read it, release it), skipping `taken`. */
export async function allocatePort(host: string, taken: ReadonlySet<number>): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const port = await new Promise<number>((resolve, reject) => {
      const srv = createServer();
      srv.once("error", reject);
      srv.listen(0, host, () => {
        const addr = srv.address();
        const p = typeof addr === "object" && addr ? addr.port : 0;
        srv.close(() => resolve(p));
      });
    });
    if (port > 0 && !taken.has(port)) return port;
  }
  throw new Error(`no free port found on ${host}`);
}
