// Where deployment sources may live: `<root>/<tenant id>` per organization (or `root` for all with
// perTenant false). A langgraph_config_path resolves against that directory and must really stay
// inside it, so a tenant cannot deploy another tenant's project or a host file (docs/CONTROL_PLANE.md).
import { statSync } from "node:fs";
import { join, resolve } from "node:path";
import { isInside } from "../../config/root.ts";

export interface ProjectRootsOptions {
  /** the directory holding the projects */
  root: string;
  /** each organization gets `<root>/<tenant id>` (default true) */
  perTenant?: boolean;
}

/** Tenant ids that can name a directory (org ids are UUIDs; an embedder's X-Tenant-Id may be anything). */
const SAFE_SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export type ResolvedSource = { ok: true; path: string } | { ok: false; problem: string };

export class ProjectRoots {
  readonly root: string;
  readonly perTenant: boolean;

  constructor(opts: ProjectRootsOptions) {
    this.root = resolve(opts.root);
    this.perTenant = opts.perTenant ?? true;
  }

  /** The directory a tenant's projects live in; undefined when its id cannot name one. */
  of(tenantId: string): string | undefined {
    if (!this.perTenant) return this.root;
    return SAFE_SEGMENT.test(tenantId) && !tenantId.includes("..") ? join(this.root, tenantId) : undefined;
  }

  /**
   * A langgraph_config_path for a tenant: relative paths resolve against its directory; a directory
   * names its service.json (else langgraph.json). Refused when outside the directory. Existence is
   * not required here: a missing file fails the build with the reason.
   */
  resolveConfigPath(tenantId: string, given: string): ResolvedSource {
    const dir = this.of(tenantId);
    if (dir === undefined) return { ok: false, problem: "This tenant id cannot name a projects directory" };
    const abs = withConfigFile(resolve(dir, given));
    if (!isInside(dir, abs)) {
      return { ok: false, problem: "Must name a project inside this organization's projects directory (relative paths resolve against it)" };
    }
    return { ok: true, path: abs };
  }
}

function withConfigFile(abs: string): string {
  try {
    if (!statSync(abs).isDirectory()) return abs;
  } catch {
    return abs; // missing: reported by the build
  }
  for (const name of ["service.json", "langgraph.json"]) {
    const candidate = join(abs, name);
    try {
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      /* try the next name */
    }
  }
  return abs;
}
