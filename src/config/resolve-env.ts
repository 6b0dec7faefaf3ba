// Resolves the config's `env` key: an object of variables, or a path to a dotenv file read now
// (relative to the config file). Returns only the variables the config declares.

import { readFile } from "node:fs/promises";
import path from "node:path";
import { parseDotenv } from "./dotenv.ts";
import { isInside } from "./root.ts";
import type { ProblemCollector } from "./errors.ts";
import type { RawConfig } from "./types.ts";

export async function resolveEnvBlock(env: RawConfig["env"], dir: string, out: ProblemCollector, root?: string): Promise<Record<string, string>> {
  if (env === undefined) return {};
  if (typeof env !== "string") return { ...env };
  const filePath = path.resolve(dir, env);
  if (root !== undefined && !isInside(root, filePath)) {
    out.error(["env"], `dotenv file ${filePath} is outside the project root ${root}`);
    return {};
  }
  let text: string;
  try {
    text = await readFile(filePath, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    out.error(["env"], code === "ENOENT" ? `dotenv file not found: ${filePath}` : `cannot read dotenv file ${filePath}: ${(err as Error).message}`);
    return {};
  }
  const parsed = parseDotenv(text);
  for (const e of parsed.errors) out.error(["env"], `${filePath} line ${e.line}: ${e.message}`);
  return parsed.vars;
}
