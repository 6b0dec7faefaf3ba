// System routes: health, server info, the API reference (/docs) and its OpenAPI document.
import { json, route, type RouteDef } from "../http/types.ts";
import { body, text } from "../http/schemas/common.ts";
import { buildOpenApi, renderDocsHtml } from "../http/openapi.ts";
import type { AppContext } from "../server/context.ts";
import { TroupeError } from "../errors.ts";

export function systemRoutes(app: AppContext, allRoutes: () => readonly RouteDef[]): RouteDef[] {
  let doc: Record<string, unknown> | undefined;
  const openapi = () =>
    (doc ??= buildOpenApi(allRoutes(), { title: "Troupe deployment server", version: app.version, description: "LangGraph-compatible deployment server API" }));
  return [
    { method: "GET", path: "/ok", operationId: "ok", summary: "Health check", tag: "system", handler: () => json({ ok: true }) },
    {
      method: "GET",
      path: "/info",
      operationId: "info",
      summary: "Server information",
      tag: "system",
      handler: () =>
        json({
          version: app.version,
          langgraph_js_version: app.langgraphVersion,
          context: "js",
          flags: { assistants: true, crons: true, langsmith: false, langsmith_tracing_replicas: true },
          node_id: app.node.id,
          nodes_alive: app.node.aliveNodes(),
        }),
    },
    route({
      method: "GET",
      path: "/metrics",
      operationId: "metrics",
      summary: "Server metrics (Prometheus text format, or JSON with ?format=json)",
      tag: "system",
      query: body({ format: text({ description: "prometheus (default) or json; anything else is prometheus" }) }),
      response: { status: 200, contentType: "text/plain", description: "Prometheus text exposition format 0.0.4" },
      handler: async ({ query }) => {
        if (!app.metrics) throw new TroupeError("NOT_FOUND", "Not Found: GET /metrics");
        const m = await app.metrics.render(query.format === "json" ? "json" : "prometheus");
        return { kind: "text", status: 200, contentType: m.contentType, body: m.body };
      },
    }),
    { method: "GET", path: "/openapi.json", operationId: "openapi", summary: "OpenAPI document", tag: "system", handler: () => json(openapi()) },
    {
      method: "GET",
      path: "/docs",
      operationId: "docs",
      summary: "API reference (HTML)",
      tag: "system",
      handler: () => ({ kind: "text", status: 200, contentType: "text/html; charset=utf-8", body: renderDocsHtml(openapi()) }),
    },
  ];
}
