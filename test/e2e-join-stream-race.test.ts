// A join stream of a background run whose end is committed in storage while its run.done is still
// on its way from the worker to the HTTP thread (fixed in 6fa5637, seen in CI on PostgreSQL: the
// stream answered empty). That window is the worker's post after its final commit, a microsecond
// wide; here it is held open with the inspector (test/helpers/inspector.ts): the run's worker is
// paused on the line that posts run.done, after the commit. A real server, real workers, real
// storage on either backend, the real SDK; nothing in the server knows it is a test.
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import { afterAll, beforeAll, expect, it } from "vitest";
import { breakInWorkers, ServerInspector, type WorkerSession } from "./helpers/inspector.ts";
import { startTestServer, type TestServer } from "./helpers/server.ts";
import { human } from "./helpers/suite.ts";
import { waitUntil } from "./helpers/wait.ts";

const traceDir = mkdtempSync(join(tmpdir(), "troupe-trace-"));
/** the server's timeline trace (TROUPE_TRACE): the HTTP thread lists what it posts to the shards */
const traceFile = join(traceDir, "trace.log");
let server: TestServer;
let client: Client;
let inspector: ServerInspector | undefined;

beforeAll(async () => {
  server = await startTestServer({
    env: { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --inspect=127.0.0.1:0`, TROUPE_TRACE: traceFile },
  });
  client = new Client({ apiUrl: server.url, apiKey: null });
  inspector = await ServerInspector.connect(server.output());
});

afterAll(async () => {
  inspector?.close();
  await server?.stop();
  server?.cleanup();
  rmSync(traceDir, { recursive: true, force: true });
});

it("streams a background run joined while its end is committed but its run.done not yet posted", async () => {
  const thread = await client.threads.create();
  const workers: WorkerSession[] = await inspector!.workers();
  // the actor posts run.done here, after the run's final commit (thread-actor.ts announceOutcome)
  const set = await breakInWorkers(workers, /actor-shard[^/]*\.mjs$/, "this.ctx.runDone({ runId: final.run_id", `this.threadId === "${thread.thread_id}"`);
  expect(set).toBeGreaterThan(0);
  const paused = Promise.race(workers.map((w) => w.session.next("Debugger.paused").then(() => w)));

  const run = await client.runs.create(thread.thread_id, "echo", { input: human("quick"), streamMode: ["values"] });
  const worker = await paused;
  // committed: storage says it ended, the HTTP thread has not heard
  await waitUntil(async () => (await client.runs.get(thread.thread_id, run.run_id)).status === "success", { what: "the run's final record" });
  await client.runs.join(thread.thread_id, run.run_id); // join reads storage: answered from the thread's values

  const events: string[] = [];
  let ended = false;
  const streamed = (async () => {
    for await (const e of client.runs.joinStream(thread.thread_id, run.run_id)) events.push(e.event);
    ended = true;
  })();
  // until the stream is answered (before 6fa5637: at once, empty) or the HTTP thread asked the
  // paused worker for the run's buffered events (it streams the run)
  await waitUntil(() => ended || (existsSync(traceFile) && / run\.observe\n/.test(readFileSync(traceFile, "utf8"))), {
    what: "the join stream to end or observe the run",
  });
  await worker.session.send("Debugger.resume");
  await streamed;
  expect(events).toEqual(["metadata", "values", "values"]);
});
