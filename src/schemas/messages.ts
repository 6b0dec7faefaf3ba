// What crosses between the HTTP thread and a schema-extraction worker (extract-worker.ts): one
// graph export in (workerData), one answer out, then the worker is terminated (a TypeScript
// program of a LangGraph project holds ~300 MB).
import type { JsonObject } from "../storage/records.ts";

/** A graph's JSON schemas by kind, as the JS server's static extractor gives them; a kind it could not type is absent. */
export interface KindSchemas {
  state?: JsonObject;
  input?: JsonObject;
  output?: JsonObject;
  config?: JsonObject;
}

/** By graph name: `<export>` for the root, `<export>|<node>|…` for the subgraphs it found through addNode. */
export type StaticGraphSchemas = Record<string, KindSchemas>;

/** Every file the extraction read, as [size, mtimeMs]: a package by its package.json. The cache holds while none changed. */
export type InputStamps = Record<string, [number, number]>;

export interface ExtractWorkerData {
  /** absolute path of the graph's source file */
  sourceFile: string;
  exportName: string;
}

export type FromExtractWorker =
  { type: "schemas.extracted"; schemas: StaticGraphSchemas; inputs: InputStamps } | { type: "schemas.failed"; message: string; inputs: InputStamps };
