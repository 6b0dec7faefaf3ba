// Reads and parses the config file, turning I/O and JSON syntax failures into ConfigErrors that
// name the file and, when the parser gives an offset, the line and column.

import { readFile } from "node:fs/promises";
import { ConfigError } from "./errors.ts";

/** 1-based line and column of a character offset. */
export function lineColumn(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, Math.max(0, Math.min(offset, text.length)));
  const lines = before.split("\n");
  return { line: lines.length, column: lines[lines.length - 1].length + 1 };
}

/**
 * Where the JSON breaks, never what the file says there: V8's messages quote the text, and a path
 * naming a key or password file must not put its contents into logs or API replies.
 */
function syntaxProblem(text: string, err: Error): string {
  const match = /at position (\d+)/.exec(err.message);
  const atEnd = /end of JSON input/.test(err.message);
  const offset = match ? Number(match[1]) : atEnd ? text.length : null;
  // V8's own wording where it quotes nothing ("Expected ',' or '}' after property value"), else a plain one
  const own = err.message.replace(/ in JSON at position \d+.*$/, "");
  const detail = atEnd ? "unexpected end of input" : /^(Expected|Bad|Unterminated|Exponent|No number)[^"]*$/.test(own) ? own : "unexpected character";
  if (offset === null) return `invalid JSON: ${detail}`;
  const { line, column } = lineColumn(text, offset);
  return `invalid JSON at line ${line}, column ${column}: ${detail}`;
}

export async function readJsonFile(absPath: string, label: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(absPath, "utf8");
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code === "ENOENT" ? "file not found" : (err as Error).message;
    throw new ConfigError(label, [{ key: "", message: `cannot read config file (${absPath}): ${reason}` }], { cause: err });
  }
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new ConfigError(label, [{ key: "", message: syntaxProblem(text, err as Error) }], { cause: err });
  }
}
