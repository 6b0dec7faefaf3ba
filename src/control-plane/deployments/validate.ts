// Rules the JSON Schemas cannot express for DeploymentCreateRequest / DeploymentPatchRequest:
// names, the supported source, secrets, and resolving `langgraph_config_path` to a file inside the
// organization's projects directory (project-roots.ts).
// Violations are VALIDATION errors (422 HTTPValidationError items naming the body field).
import { TroupeError, type ValidationIssue } from "../../errors.ts";
import type { ResolvedSource } from "./project-roots.ts";
import type { JsonObject } from "../../storage/records.ts";
import type { Secret, SecretReference, SourceRevisionConfig } from "./types.ts";

/** Names are taken as given, never rewritten: lowercase letters, digits and inner hyphens. */
export const NAME_RE = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const SECRET_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Env vars the control plane sets for a deployment server, or that would change its limits: not a tenant's to set. */
const RESERVED_SECRET = /^TROUPE_/i;

/** langgraph_config_path as given → the absolute config file, or why it is refused. */
export type ConfigPathResolver = (given: string) => ResolvedSource;

export interface CreateRequest {
  name: string;
  source: string;
  source_config?: JsonObject | null;
  source_revision_config: (JsonObject & { langgraph_config_path?: string | null }) | null;
  secrets?: Secret[] | null;
  secret_references?: SecretReference[] | null;
}

export interface PatchRequest {
  name?: string;
  revision_source?: string | null;
  source_config?: JsonObject | null;
  source_revision_config?: (JsonObject & { langgraph_config_path?: string | null }) | null;
  secrets?: Secret[] | null;
  secret_references?: SecretReference[] | null;
  display_name?: string | null;
}

/** What the platform lowercases a free-form name to (shown in the error as a suggestion). */
export function suggestName(name: string): string {
  return name
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, "-")
    .replace(/-+/g, "-")
    .replace(/^-|-$/g, "")
    .slice(0, 63);
}

class Issues {
  readonly list: ValidationIssue[] = [];
  add(field: (string | number)[], msg: string, type = "value_error"): void {
    this.list.push({ loc: ["body", ...field], msg, type });
  }
  throwIfAny(): void {
    if (this.list.length) throw new TroupeError("VALIDATION", this.list.map((i) => `${i.loc.join(".")}: ${i.msg}`).join("; "), { issues: this.list });
  }
}

export function checkCreate(req: CreateRequest, resolvePath: ConfigPathResolver): { sourceRevisionConfig: SourceRevisionConfig; secrets: Secret[] } {
  const out = new Issues();
  if (!NAME_RE.test(req.name)) {
    const hint = suggestName(req.name);
    out.add(["name"], `Name must be 1-63 lowercase letters, digits or hyphens, starting and ending with a letter or digit${hint ? ` (e.g. "${hint}")` : ""}`);
  }
  checkSource(req.source, ["source"], out);
  const src = checkRevisionConfig(req.source_revision_config, true, resolvePath, out);
  const secrets = checkSecrets(req.secrets ?? [], out);
  checkSecretReferences(req.secret_references, out);
  out.throwIfAny();
  return { sourceRevisionConfig: src!, secrets };
}

export interface PatchPlan {
  displayName?: string | null;
  sourceConfig?: JsonObject | null;
  /** present when the patch makes a new revision */
  revision?: { sourceRevisionConfig: SourceRevisionConfig; secrets: Secret[] };
}

/**
 * Platform rules (§1.5): a `source_revision_config` with any non-null field, or a non-empty `secrets`
 * list, makes a new revision (an empty list means "unchanged": secrets cannot all be cleared);
 * `display_name` and `source_config` change in place. Omitted fields carry over from the latest revision.
 */
export function planPatch(
  req: PatchRequest,
  current: { name: string; source_revision_config: SourceRevisionConfig; secrets: Secret[] },
  resolvePath: ConfigPathResolver,
): PatchPlan {
  const out = new Issues();
  if (req.name !== undefined && req.name !== current.name) out.add(["name"], "Name is immutable");
  if (req.revision_source != null) checkSource(req.revision_source, ["revision_source"], out);
  checkSecretReferences(req.secret_references, out);
  const plan: PatchPlan = {};
  if (req.display_name !== undefined) plan.displayName = req.display_name;
  if (req.source_config !== undefined) plan.sourceConfig = req.source_config;
  let src: SourceRevisionConfig | undefined;
  const given = req.source_revision_config;
  if (given != null && Object.values(given).some((v) => v != null)) {
    src = checkRevisionConfig(
      { ...given, langgraph_config_path: given.langgraph_config_path ?? current.source_revision_config.langgraph_config_path },
      false,
      resolvePath,
      out,
    );
  }
  const secrets = req.secrets != null && req.secrets.length > 0 ? checkSecrets(req.secrets, out) : undefined;
  out.throwIfAny();
  if (src || secrets) plan.revision = { sourceRevisionConfig: src ?? current.source_revision_config, secrets: secrets ?? current.secrets };
  return plan;
}

function checkSource(source: string, loc: string[], out: Issues): void {
  if (source !== "internal_source") {
    out.add(
      loc,
      `Source "${source}" is not supported by Troupe: use "internal_source" (a local project directory named by source_revision_config.langgraph_config_path)`,
      "enum",
    );
  }
}

const UNSUPPORTED_REVISION_FIELDS = ["repo_ref", "image_uri", "source_tarball_path", "repo_commit_sha"];

function checkRevisionConfig(
  c: CreateRequest["source_revision_config"],
  required: boolean,
  resolvePath: ConfigPathResolver,
  out: Issues,
): SourceRevisionConfig | undefined {
  if (c == null) {
    if (required) out.add(["source_revision_config"], "Field required for internal_source: give langgraph_config_path", "missing");
    return undefined;
  }
  for (const f of UNSUPPORTED_REVISION_FIELDS) {
    if (c[f] != null) out.add(["source_revision_config", f], `Not supported for internal_source (Troupe builds from a local directory)`);
  }
  const p = c.langgraph_config_path;
  if (typeof p !== "string" || p.trim() === "") {
    out.add(["source_revision_config", "langgraph_config_path"], "Field required: path of the project's service.json or langgraph.json", "missing");
    return undefined;
  }
  const resolved = resolvePath(p);
  if (!resolved.ok) {
    out.add(["source_revision_config", "langgraph_config_path"], resolved.problem);
    return undefined;
  }
  return { langgraph_config_path: resolved.path };
}

function checkSecrets(secrets: Secret[], out: Issues): Secret[] {
  const seen = new Set<string>();
  secrets.forEach((s, i) => {
    if (!SECRET_NAME_RE.test(s.name)) out.add(["secrets", i, "name"], "Secret names must be environment variable names ([A-Za-z_][A-Za-z0-9_]*)");
    else if (RESERVED_SECRET.test(s.name)) out.add(["secrets", i, "name"], `Secret names starting with TROUPE_ are reserved for the platform ("${s.name}")`);
    else if (seen.has(s.name)) out.add(["secrets", i, "name"], `Duplicate secret name "${s.name}"`);
    seen.add(s.name);
  });
  return secrets.map((s) => ({ name: s.name, value: s.value }));
}

function checkSecretReferences(refs: SecretReference[] | null | undefined, out: Issues): void {
  if (refs != null && refs.length > 0)
    out.add(["secret_references"], "Secret references (Kubernetes secrets) are only supported for external_docker sources; use secrets");
}
