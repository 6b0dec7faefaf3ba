// The OpenAPI 3.1 document, generated from the same route table and JSON Schemas that ajv
// validates with, so /docs can never drift from what the server accepts.
import type { JsonSchema } from "./schema-types.ts";
import type { RouteDef } from "./types.ts";
import { MAX_KEY_CHARS } from "./schemas/common.ts";

const VALIDATION_ERROR: JsonSchema = {
  type: "object",
  required: ["detail"],
  properties: {
    detail: {
      type: "array",
      items: {
        type: "object",
        required: ["loc", "msg", "type"],
        properties: { loc: { type: "array", items: { anyOf: [{ type: "string" }, { type: "integer" }] } }, msg: { type: "string" }, type: { type: "string" } },
      },
    },
  },
};
const ERROR: JsonSchema = { type: "object", required: ["detail"], properties: { detail: { type: "string" } } };

export interface OpenApiSecurity {
  /** components.securitySchemes */
  schemes: Record<string, Record<string, unknown>>;
  /** alternatives applied to every operation except those listed as public */
  requirement: Record<string, string[]>[];
  publicPaths?: string[];
}

/** The control plane's schemes, named as the service spec names them. */
export const CONTROL_PLANE_SECURITY: OpenApiSecurity = {
  schemes: {
    "API Key": { type: "apiKey", in: "header", name: "X-Api-Key" },
    "Tenant ID": { type: "apiKey", in: "header", name: "X-Tenant-Id" },
    "Bearer Auth": { type: "http", scheme: "bearer" },
  },
  requirement: [{ "API Key": [], "Tenant ID": [] }, { "API Key": [] }, { "Bearer Auth": [] }],
  publicPaths: ["/ok", "/openapi.json", "/docs"],
};

const errorResponse = (description: string): Record<string, unknown> => ({
  description,
  content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
});

/** The error statuses a route can answer, from what it takes (every reply documented in docs/ERRORS.md). */
function errorResponses(r: RouteDef, secured: boolean): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (r.body) {
    out["400"] = errorResponse("Malformed JSON, or a request the server cannot carry out");
    out["413"] = errorResponse("Request body too large");
    out["415"] = errorResponse("Unsupported content type");
  }
  if (secured) {
    out["401"] = errorResponse("Missing or invalid credentials");
    out["403"] = errorResponse("Not allowed");
  }
  if (r.path.includes(":")) out["404"] = errorResponse("Not found");
  if (r.body || r.query || r.params)
    out["422"] = { description: "Validation Error", content: { "application/json": { schema: { $ref: "#/components/schemas/HTTPValidationError" } } } };
  out["429"] = errorResponse("Rate limited (when rate limits are on): see Retry-After");
  return out;
}

export function buildOpenApi(
  routes: readonly RouteDef[],
  info: { title: string; version: string; description?: string },
  security?: OpenApiSecurity,
): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) {
    const path = r.path.replace(/:([A-Za-z_]+)/g, "{$1}");
    const parameters: Record<string, unknown>[] = [];
    for (const m of r.path.matchAll(/:([A-Za-z_]+)/g)) {
      const kind = r.params?.[m[1]];
      parameters.push({
        name: m[1],
        in: "path",
        required: true,
        schema: kind === "uuid" ? { type: "string", format: "uuid" } : { type: "string", maxLength: MAX_KEY_CHARS },
      });
    }
    for (const [name, schema] of Object.entries(r.query?.properties ?? {})) {
      parameters.push({ name, in: "query", required: r.query?.required?.includes(name) ?? false, schema });
    }
    const status = String(r.response?.status ?? 200);
    const op: Record<string, unknown> = {
      operationId: r.operationId,
      summary: r.summary,
      tags: [r.tag],
      parameters,
      responses: {
        [status]: {
          description: r.response?.description ?? "Success",
          ...(r.response?.contentType || r.response?.schema
            ? { content: { [r.response?.contentType ?? "application/json"]: { schema: r.response?.schema ?? {} } } }
            : {}),
        },
        ...errorResponses(r, security !== undefined && !security.publicPaths?.includes(r.path)),
      },
    };
    if (r.body) op.requestBody = { required: !r.bodyOptional, content: { "application/json": { schema: r.body } } };
    if (security && !security.publicPaths?.includes(r.path)) op.security = security.requirement;
    (paths[path] ??= {})[r.method.toLowerCase()] = op;
  }
  return {
    openapi: "3.1.0",
    info,
    paths,
    components: { schemas: { HTTPValidationError: VALIDATION_ERROR, Error: ERROR }, ...(security ? { securitySchemes: security.schemes } : {}) },
  };
}

/** A self-contained HTML reference (no CDN: servers here may have no internet access). */
export function renderDocsHtml(doc: Record<string, unknown>): string {
  const info = doc.info as { title: string; version: string };
  const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const rows: string[] = [];
  for (const [path, ops] of Object.entries(
    doc.paths as Record<string, Record<string, { summary: string; operationId: string; requestBody?: { content: Record<string, { schema: unknown }> } }>>,
  )) {
    for (const [method, op] of Object.entries(ops)) {
      const schema = op.requestBody
        ? `<details><summary>request body</summary><pre>${esc(JSON.stringify(op.requestBody.content["application/json"].schema, null, 2))}</pre></details>`
        : "";
      rows.push(
        `<tr><td class="m">${method.toUpperCase()}</td><td><code>${esc(path)}</code></td><td>${esc(op.summary)}<br><small>${op.operationId}</small>${schema}</td></tr>`,
      );
    }
  }
  return `<!doctype html><html><head><meta charset="utf-8"><title>${esc(info.title)} API reference</title>
<style>body{font-family:system-ui,sans-serif;margin:2rem}table{border-collapse:collapse;width:100%}td{border-top:1px solid #ddd;padding:.4rem;vertical-align:top}.m{font-weight:bold}pre{background:#f6f6f6;padding:.5rem;overflow:auto}</style></head>
<body><h1>${esc(info.title)} <small>${esc(info.version)}</small></h1><p>Machine-readable: <a href="/openapi.json">/openapi.json</a></p><table>${rows.join("\n")}</table></body></html>`;
}
