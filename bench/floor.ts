// troupe-bench floor: what LangGraph.js itself costs for a graph on this machine, in-process, with
// no server, HTTP or worker threads. Any server's figures for the same graph are bounded by these:
// e.g. on C cores no server can finish more than C * 1000 / invoke_ms runs per second, and N runs
// on one thread take at least the "one long thread" time. Record them next to bench results so a
// target can be read against the machine it was measured on (bench/RESULTS.md).
//
// Usage: npm run bench:floor -- [--graph examples/echo.ts:graph] [--runs 2000] [--long 1000]
//                               [--input '{"messages":[{"role":"human","content":"hi"}]}']
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { MemorySaver } from "@langchain/langgraph";
import { BaseCheckpointSaver, type Checkpoint, type CheckpointMetadata, type CheckpointTuple } from "@langchain/langgraph-checkpoint";
import type { RunnableConfig } from "@langchain/core/runnables";
import { GraphRegistry } from "../src/actors/graph-registry.ts";
import { parseImportString } from "../src/config/import-ref.ts";
import { LmdbCheckpointSaver } from "../src/storage/checkpoints/lmdb-saver.ts";
import { openStorage } from "../src/storage/env.ts";
import { summarize } from "./stats.ts";

interface StreamableGraph {
  invoke(input: unknown, config: Record<string, unknown>): Promise<unknown>;
  stream(input: unknown, config: Record<string, unknown>): Promise<AsyncIterable<unknown>>;
  withConfig(config: Record<string, unknown>): StreamableGraph;
  checkpointer?: unknown;
}

/**
 * Keeps each thread's latest checkpoint by reference: no serialization, no copies. Only valid for
 * straight-line runs (no interrupts, no history reads); it exists to price LangGraph alone.
 */
class ByReferenceSaver extends BaseCheckpointSaver {
  private readonly latest = new Map<string, CheckpointTuple>();

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    return this.latest.get(String(config.configurable?.thread_id));
  }

  async *list(): AsyncGenerator<CheckpointTuple> {}

  async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata): Promise<RunnableConfig> {
    const threadId = String(config.configurable?.thread_id);
    const saved = { configurable: { thread_id: threadId, checkpoint_ns: "", checkpoint_id: checkpoint.id } };
    this.latest.set(threadId, { config: saved, checkpoint, metadata, pendingWrites: [], parentConfig: config });
    return saved;
  }

  async putWrites(): Promise<void> {}

  async deleteThread(threadId: string): Promise<void> {
    this.latest.delete(threadId);
  }
}

/** The graph as the server would load it (same export forms: compiled, StateGraph, factory). */
async function loadGraph(spec: string): Promise<StreamableGraph> {
  const ref = parseImportString(spec);
  if ("problem" in ref) throw new Error(`--graph ${ref.problem}`);
  const registry = new GraphRegistry([{ graphId: "floor", filePath: resolve(ref.file), exportName: ref.exportName }], {
    checkpointer: () => undefined,
    store: undefined,
  });
  return (await registry.get("floor", {})) as unknown as StreamableGraph;
}

function withSaver(graph: StreamableGraph, saver: unknown): StreamableGraph {
  const g = graph.withConfig({});
  g.checkpointer = saver;
  return g;
}

/** ms per call of `once`, after `warmup` unmeasured calls. */
async function time(runs: number, warmup: number, once: (i: number) => Promise<unknown>): Promise<{ meanMs: number; p50Ms: number }> {
  for (let i = 0; i < warmup; i++) await once(-1 - i);
  const samples: number[] = [];
  const t0 = performance.now();
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    await once(i);
    samples.push(performance.now() - t);
  }
  return { meanMs: (performance.now() - t0) / runs, p50Ms: summarize(samples).p50Ms };
}

async function drain(stream: Promise<AsyncIterable<unknown>>): Promise<void> {
  for await (const _ of await stream) void _;
}

const USAGE = `troupe-bench floor: what LangGraph.js itself costs for a graph, in-process (no server)

Usage: npm run bench:floor -- [--graph FILE:EXPORT] [--runs N] [--long N] [--input JSON]

  --graph FILE:EXPORT  the graph to measure (default examples/echo.ts:graph)
  --runs N             runs on fresh threads per measurement, after up to 500 warm-up runs (default 2000)
  --long N             runs on one thread for the long-thread rows (default 1000)
  --input JSON         each run's input (default {"messages":[{"role":"human","content":"hi"}]})
`;

async function main(): Promise<void> {
  if (process.argv.includes("--help") || process.argv.includes("-h")) {
    process.stdout.write(USAGE);
    return;
  }
  const { values } = parseArgs({
    options: {
      graph: { type: "string", default: "examples/echo.ts:graph" },
      runs: { type: "string", default: "2000" },
      long: { type: "string", default: "1000" },
      input: { type: "string", default: JSON.stringify({ messages: [{ role: "human", content: "hi" }] }) },
    },
  });
  const runs = Number(values.runs);
  const long = Number(values.long);
  for (const [name, n] of [
    ["--runs", runs],
    ["--long", long],
  ] as const) {
    if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer, got "${name === "--runs" ? values.runs : values.long}"`);
  }
  const input = JSON.parse(values.input) as unknown;
  const graph = await loadGraph(values.graph);
  const dataDir = mkdtempSync(join(tmpdir(), "troupe-floor-"));
  const storage = openStorage(dataDir);
  const cores = availableParallelism();
  const warmup = Math.min(500, runs);
  const fresh = (g: StreamableGraph, streamed: boolean) => (i: number) => {
    const config = { configurable: { thread_id: `${i}-${randomUUID()}` }, streamMode: ["values"] };
    return streamed ? drain(g.stream(input, config)) : g.invoke(input, config);
  };

  const rows: [string, string][] = [];
  const invoke = await time(runs, warmup, fresh(withSaver(graph, new MemorySaver()), false));
  rows.push(["invoke, MemorySaver, fresh threads (ms/run mean, p50)", `${invoke.meanMs.toFixed(2)}, ${invoke.p50Ms.toFixed(2)}`]);
  const byRef = await time(runs, warmup, fresh(withSaver(graph, new ByReferenceSaver()), true));
  rows.push(["stream values, by-reference saver, fresh threads", `${byRef.meanMs.toFixed(2)}, ${byRef.p50Ms.toFixed(2)}`]);
  const lmdb = await time(runs, warmup, fresh(withSaver(graph, new LmdbCheckpointSaver(storage)), true));
  rows.push(["stream values, Troupe's LMDB saver, fresh threads", `${lmdb.meanMs.toFixed(2)}, ${lmdb.p50Ms.toFixed(2)}`]);

  const longThread = async (saver: unknown): Promise<number> => {
    const g = withSaver(graph, saver);
    const threadId = randomUUID();
    const t0 = performance.now();
    for (let i = 0; i < long; i++) {
      await drain(g.stream(input, { configurable: { thread_id: threadId }, streamMode: ["values"] }));
      // one event-loop turn between runs, as a server's actor takes: lmdb-js commits a turn's
      // writes when the turn ends, and the saver skips re-writing what it knows is committed
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    return (performance.now() - t0) / 1000;
  };
  const longByRef = await longThread(new ByReferenceSaver());
  rows.push([`${long} runs on one thread, by-reference saver (s)`, longByRef.toFixed(2)]);
  const longLmdb = await longThread(new LmdbCheckpointSaver(storage));
  rows.push([`${long} runs on one thread, Troupe's LMDB saver (s)`, longLmdb.toFixed(2)]);
  rows.push([`bound: runs/s on ${cores} cores at the invoke floor`, ((cores * 1000) / invoke.meanMs).toFixed(0)]);

  await storage.close();
  rmSync(dataDir, { recursive: true, force: true });
  const width = Math.max(...rows.map(([k]) => k.length));
  console.log(`floor of ${values.graph} (node ${process.version}, ${cores} cores, ${runs} runs after ${warmup} warm-up runs)`);
  for (const [k, v] of rows) console.log(`${k.padEnd(width)}  ${v}`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err instanceof Error ? err.stack : String(err));
    process.exit(1);
  },
);
