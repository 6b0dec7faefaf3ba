// Confinement of a config to a directory (LoadConfigOptions.root): the config file and every file it
// names must really be inside — real paths, so a symlink out of the directory does not count as in.
import { realpathSync } from "node:fs";
import path from "node:path";

/** The real path of `p`, or for a path that does not exist yet, its nearest existing ancestor's real path + the rest. */
export function realPathOf(p: string): string {
  const abs = path.resolve(p);
  let rest = "";
  let cur = abs;
  for (;;) {
    try {
      return path.join(realpathSync.native(cur), rest);
    } catch {
      const parent = path.dirname(cur);
      if (parent === cur) return abs;
      rest = path.join(path.basename(cur), rest);
      cur = parent;
    }
  }
}

/** Is `file` (resolved, symlinks followed) inside directory `root` (or `root` itself)? */
export function isInside(root: string, file: string): boolean {
  const rel = path.relative(realPathOf(root), realPathOf(file));
  return rel === "" || (rel !== ".." && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel));
}
