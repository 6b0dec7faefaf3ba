// Runs in a short-lived worker thread (workers/schema-extract.ts): the JS server's own static
// schema extractor (`getStaticGraphSchema` of @langchain/langgraph-api, its `./schema` export)
// over one graph file, with the TypeScript compiler. It takes seconds of CPU and ~300 MB, hence
// its own thread, never the HTTP thread, and a fresh one each time (its memory goes with it).
// Every file TypeScript reads is noted, so the HTTP thread can keep the answer while none changes.
import { statSync } from "node:fs";
import { join, sep } from "node:path";
import type { MessagePort } from "node:worker_threads";
import ts from "typescript";
import { getStaticGraphSchema } from "@langchain/langgraph-api/schema";
import type { ExtractWorkerData, FromExtractWorker, InputStamps, StaticGraphSchemas } from "./messages.ts";

const NODE_MODULES = `${sep}node_modules${sep}`;

export async function runSchemaExtraction(port: MessagePort, data: ExtractWorkerData): Promise<void> {
  const read = noteFilesRead();
  let msg: FromExtractWorker;
  try {
    const schemas = await getStaticGraphSchema({ sourceFile: data.sourceFile, exportSymbol: data.exportName }, { mainThread: true });
    msg = { type: "schemas.extracted", schemas: JSON.parse(JSON.stringify(schemas)) as StaticGraphSchemas, inputs: stamps(read) };
  } catch (err) {
    const cause = err instanceof Error && err.cause instanceof Error ? `: ${err.cause.message}` : "";
    msg = { type: "schemas.failed", message: `${err instanceof Error ? err.message : String(err)}${cause}`, inputs: stamps(read) };
  }
  port.postMessage(msg);
}

/**
 * Notes the files TypeScript reads (the extractor reads through ts.sys): a file in a package
 * stands for its package's package.json (a new version changes it), so the list stays short.
 */
function noteFilesRead(): Set<string> {
  const files = new Set<string>();
  const readFile = ts.sys.readFile.bind(ts.sys);
  ts.sys.readFile = (path, encoding) => {
    const text = readFile(path, encoding);
    if (text !== undefined) files.add(packageJsonOf(path) ?? path);
    return text;
  };
  return files;
}

function packageJsonOf(path: string): string | undefined {
  const at = path.lastIndexOf(NODE_MODULES);
  if (at < 0) return undefined;
  const rest = path.slice(at + NODE_MODULES.length).split(sep);
  const name = rest[0]?.startsWith("@") ? rest.slice(0, 2) : rest.slice(0, 1);
  return join(path.slice(0, at + NODE_MODULES.length), ...name, "package.json");
}

function stamps(files: Iterable<string>): InputStamps {
  const out: InputStamps = {};
  for (const file of files) {
    const st = statSync(file, { throwIfNoEntry: false });
    if (st?.isFile()) out[file] = [st.size, st.mtimeMs];
  }
  return out;
}
