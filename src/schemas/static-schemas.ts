// HTTP-thread side of static schema extraction: the JSON schemas a graph file's TypeScript types
// give (what the JS server answers for Annotation graphs), extracted in a worker thread on first
// need and kept per build: in memory, and on disk under the data directory
// (`modules/schemas/`) with the size and mtime of every file the extraction read, so a warm start
// whose files did not change never runs the TypeScript checker again. One extraction at a time
// (each takes seconds of CPU and ~300 MB); an extraction that fails is remembered like an answer,
// one that times out is not (the next request tries again).
import { createHash } from "node:crypto";
import { mkdir, readFile, rename, stat, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import type { ImportRef } from "../config/types.ts";
import type { ExtractWorkerData, FromExtractWorker, InputStamps, StaticGraphSchemas } from "./messages.ts";

/** Graph files the TypeScript checker can read; plain JS graphs have runtime and channel schemas only. */
const TYPESCRIPT_FILE = /\.[cm]?tsx?$/;
/** The extractor's own default is 30 s; a 2-core machine under load needs more for a first program. */
const DEFAULT_TIMEOUT_MS = 120_000;
/** Bump when what is stored changes shape. */
const CACHE_FORMAT = 1;

interface CacheFile {
  /** extractor version and cache format: another one's answer is not reused */
  extractor: string;
  graph: ImportRef;
  inputs: InputStamps;
  /** null: the extractor could not say (`error` says why) */
  schemas: StaticGraphSchemas | null;
  error?: string;
}

export interface StaticSchemasOptions {
  /** URL of the compiled worker entry, workers/schema-extract.ts (src/loader/runtime-modules.ts) */
  entryUrl: string;
  /** where answers are kept across restarts (`<data dir>/modules/schemas`) */
  cacheDir: string;
  /** default: env LANGGRAPH_SCHEMA_RESOLVE_TIMEOUT_MS (as the JS server), else 120 s */
  timeoutMs?: number;
  log?: (message: string) => void;
}

export class StaticSchemas {
  private readonly pending = new Map<string, Promise<StaticGraphSchemas | null>>();
  private readonly known = new Map<string, StaticGraphSchemas | null>();
  /** extractions run one after another */
  private lane: Promise<unknown> = Promise.resolve();
  private readonly extractor: string;
  private readonly timeoutMs: number;
  private readonly log: (message: string) => void;

  constructor(
    private readonly graphs: ReadonlyMap<string, ImportRef>,
    private readonly opts: StaticSchemasOptions,
  ) {
    this.extractor = `${extractorVersion()}/${CACHE_FORMAT}`;
    const fromEnv = Number(process.env.LANGGRAPH_SCHEMA_RESOLVE_TIMEOUT_MS);
    this.timeoutMs = opts.timeoutMs ?? (Number.isInteger(fromEnv) && fromEnv > 0 ? fromEnv : DEFAULT_TIMEOUT_MS);
    this.log = opts.log ?? ((m) => console.warn(`[troupe] ${m}`));
  }

  /** The graph's static schemas: kept, or extracted now; null when its types cannot say. */
  of(graphId: string): Promise<StaticGraphSchemas | null> {
    if (this.known.has(graphId)) return Promise.resolve(this.known.get(graphId)!);
    let p = this.pending.get(graphId);
    if (!p) {
      p = this.resolve(graphId).finally(() => this.pending.delete(graphId));
      this.pending.set(graphId, p);
    }
    return p;
  }

  /** What is known without waiting (no extraction is started): undefined while unknown. */
  peek(graphId: string): StaticGraphSchemas | null | undefined {
    return this.known.get(graphId);
  }

  private async resolve(graphId: string): Promise<StaticGraphSchemas | null> {
    const graph = this.graphs.get(graphId);
    if (!graph || !TYPESCRIPT_FILE.test(graph.filePath)) return this.remember(graphId, null);
    const file = join(
      this.opts.cacheDir,
      `${createHash("sha256").update(`${graphId}\0${graph.filePath}\0${graph.exportName}`).digest("hex").slice(0, 24)}.json`,
    );
    const cached = await this.readCache(file, graph);
    if (cached) return this.remember(graphId, cached.schemas);
    const run = this.lane.then(() => this.extract(graph));
    this.lane = run.catch(() => undefined);
    const outcome = await run;
    if (outcome === "timeout") return null; // not remembered: a later request tries again
    if (outcome.type === "schemas.failed") this.log(`graph "${graphId}": no schemas from its TypeScript types (${outcome.message})`);
    const entry: CacheFile = {
      extractor: this.extractor,
      graph: { filePath: graph.filePath, exportName: graph.exportName },
      inputs: outcome.inputs,
      schemas: outcome.type === "schemas.extracted" ? outcome.schemas : null,
      ...(outcome.type === "schemas.failed" ? { error: outcome.message } : {}),
    };
    // a failure that read nothing (the worker itself failed) may not happen again: not kept on disk
    if (Object.keys(entry.inputs).length > 0)
      await this.writeCache(file, entry).catch((err: unknown) => this.log(`schema cache not written (${(err as Error).message})`));
    return this.remember(graphId, entry.schemas);
  }

  private remember(graphId: string, schemas: StaticGraphSchemas | null): StaticGraphSchemas | null {
    this.known.set(graphId, schemas);
    return schemas;
  }

  /** The kept answer, when it is this extractor's, for this export, and no file it read changed. */
  private async readCache(file: string, graph: ImportRef): Promise<CacheFile | undefined> {
    let entry: CacheFile;
    try {
      entry = JSON.parse(await readFile(file, "utf8")) as CacheFile;
    } catch {
      return undefined;
    }
    if (entry.extractor !== this.extractor || entry.graph?.filePath !== graph.filePath || entry.graph?.exportName !== graph.exportName) return undefined;
    const checks = await Promise.all(
      Object.entries(entry.inputs ?? {}).map(async ([path, [size, mtimeMs]]) => {
        const st = await stat(path).catch(() => undefined);
        return st !== undefined && st.size === size && st.mtimeMs === mtimeMs;
      }),
    );
    return checks.every(Boolean) ? entry : undefined;
  }

  private async writeCache(file: string, entry: CacheFile): Promise<void> {
    await mkdir(this.opts.cacheDir, { recursive: true });
    const tmp = `${file}.${process.pid}.tmp`;
    await writeFile(tmp, JSON.stringify(entry));
    await rename(tmp, file);
  }

  /** One extraction in a fresh worker thread; its output (TypeScript diagnostics) is kept only for a failure's message. */
  private extract(graph: ImportRef): Promise<FromExtractWorker | "timeout"> {
    const workerData: ExtractWorkerData = { sourceFile: graph.filePath, exportName: graph.exportName };
    const worker = new Worker(new URL(this.opts.entryUrl), { execArgv: ["--enable-source-maps"], workerData, stdout: true, stderr: true });
    let output = "";
    const keep = (d: Buffer) => (output = (output + d.toString("utf8")).slice(-2000));
    worker.stdout.on("data", keep);
    worker.stderr.on("data", keep);
    return new Promise((resolve) => {
      const done = (result: FromExtractWorker | "timeout") => {
        clearTimeout(timer);
        worker.removeAllListeners("exit");
        void worker.terminate();
        resolve(result);
      };
      const timer = setTimeout(() => {
        this.log(`schema extraction of ${graph.filePath} timed out after ${this.timeoutMs} ms (LANGGRAPH_SCHEMA_RESOLVE_TIMEOUT_MS)`);
        done("timeout");
      }, this.timeoutMs);
      worker.once("message", (msg: FromExtractWorker) => done(msg));
      worker.once("error", (err) => done({ type: "schemas.failed", message: err.message, inputs: {} }));
      worker.once("exit", (code) =>
        done({ type: "schemas.failed", message: `the worker exited (${code}) ${output.trim().split("\n").slice(-3).join(" ")}`.trim(), inputs: {} }),
      );
    });
  }
}

function extractorVersion(): string {
  try {
    const require = createRequire(import.meta.url);
    return (require("@langchain/langgraph-api/package.json") as { version: string }).version;
  } catch {
    return "unknown";
  }
}
