// HTTP routes of the deployments API (`/v2/deployments…`, platform.md §1.2). Thin: parse, scope to
// the caller's tenant, call the DeploymentService, shape the wire. Operation ids follow the
// platform's FastAPI naming.
import { TroupeError } from "../errors.ts";
import { canonicalUuid, isUuid } from "../util/ids.ts";
import { empty, json, route, type RequestContext, type RouteDef } from "../http/types.ts";
import type { DeploymentService } from "./deployments/service.ts";
import { DEPLOYMENT_STATUSES, REVISION_STATUSES, deploymentToWire, revisionToWire, type DeploymentRecord } from "./deployments/types.ts";
import { deploymentCreateBody, deploymentListQuery, deploymentPatchBody, deploymentSchema, listOf, revisionListQuery, revisionSchema } from "./schemas.ts";

const TAG = "deployments (v2)";

/** Tenant of deployments created without any identity (no auth guard, no X-Tenant-Id). */
export const DEFAULT_TENANT_ID = "00000000-0000-0000-0000-000000000000";

export interface ControlPlaneRouteContext {
  deployments: DeploymentService;
}

/**
 * The caller's tenant: the organization an auth guard established (`auth.org`), else the
 * `X-Tenant-Id` header, else DEFAULT_TENANT_ID. Every route only sees that tenant's deployments.
 */
export function tenantOf(ctx: Pick<RequestContext, "auth" | "headers">): string {
  return ctx.auth?.org ?? (ctx.headers["x-tenant-id"]?.trim() || DEFAULT_TENANT_ID);
}

function commaList(v: string | undefined, allowed: readonly string[] | null, field: string): string[] | undefined {
  if (v === undefined) return undefined;
  const items = v
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  if (allowed) {
    const bad = items.filter((s) => !allowed.includes(s));
    if (bad.length) {
      const msg = `Input should be a comma-separated list of ${allowed.join(", ")}`;
      throw new TroupeError("VALIDATION", `query.${field}: ${msg}`, { issues: [{ loc: ["query", field], msg, type: "enum" }] });
    }
  }
  return items;
}

/** A comma-separated list of UUIDs (canonical form), 422 naming the field for anything else. */
function uuidList(v: string | undefined, field: string): string[] | undefined {
  const items = commaList(v, null, field);
  if (items === undefined) return undefined;
  if (!items.every(isUuid)) {
    const msg = "Input should be a comma-separated list of UUIDs";
    throw new TroupeError("VALIDATION", `query.${field}: ${msg}`, { issues: [{ loc: ["query", field], msg, type: "uuid_parsing" }] });
  }
  return items.map(canonicalUuid);
}

function paged<T>(items: T[], q: { limit: number; offset: number }): { resources: T[]; offset: number } {
  const resources = items.slice(q.offset, q.offset + q.limit);
  return { resources, offset: q.offset + resources.length };
}

export function controlPlaneRoutes(ctx: ControlPlaneRouteContext): RouteDef[] {
  const svc = ctx.deployments;
  const wire = (d: DeploymentRecord) => deploymentToWire(d, svc.deployer.url(d));
  const params = { deployment_id: "uuid" } as const;
  const revParams = { deployment_id: "uuid", revision_id: "uuid" } as const;

  return [
    route({
      method: "POST",
      path: "/v2/deployments",
      operationId: "create_deployment_v2_deployments_post",
      summary: "Create a deployment (starts its first revision)",
      tag: TAG,
      body: deploymentCreateBody,
      response: { status: 201, schema: deploymentSchema },
      handler: async (c) => json(wire(await svc.create(c.body, tenantOf(c))), 201),
    }),
    route({
      method: "GET",
      path: "/v2/deployments",
      operationId: "list_deployments_v2_deployments_get",
      summary: "List deployments, newest first",
      tag: TAG,
      query: deploymentListQuery,
      response: { status: 200, schema: listOf(deploymentSchema) },
      handler: (c) => {
        const q = c.query;
        const found = svc.store.list({
          tenantId: tenantOf(c),
          nameContains: q.name_contains,
          statuses: commaList(q.status, DEPLOYMENT_STATUSES, "status"),
          ids: uuidList(q.deployment_ids, "deployment_ids"),
        });
        const p = paged(found, q);
        return json({ resources: p.resources.map(wire), offset: p.offset });
      },
    }),
    route({
      method: "GET",
      path: "/v2/deployments/:deployment_id",
      operationId: "get_deployment_v2_deployments__deployment_id__get",
      summary: "Get a deployment",
      tag: TAG,
      params,
      response: { status: 200, schema: deploymentSchema },
      handler: (c) => json(wire(svc.store.require(c.params.deployment_id, tenantOf(c)))),
    }),
    route({
      method: "PATCH",
      path: "/v2/deployments/:deployment_id",
      operationId: "patch_deployment_v2_deployments__deployment_id__patch",
      summary: "Update a deployment (new secrets or source_revision_config make a new revision)",
      tag: TAG,
      params,
      body: deploymentPatchBody,
      bodyOptional: true,
      response: { status: 200, schema: deploymentSchema },
      handler: async (c) => json(wire(await svc.patch(c.params.deployment_id, c.body, tenantOf(c)))),
    }),
    route({
      method: "DELETE",
      path: "/v2/deployments/:deployment_id",
      operationId: "delete_deployment_v2_deployments__deployment_id__delete",
      summary: "Delete a deployment: stop its server, remove its records and data",
      tag: TAG,
      params,
      response: { status: 204, description: "Deleted" },
      handler: async (c) => {
        await svc.delete(c.params.deployment_id, tenantOf(c));
        return empty(204);
      },
    }),
    route({
      method: "GET",
      path: "/v2/deployments/:deployment_id/revisions",
      operationId: "list_revisions_v2_deployments__deployment_id__revisions_get",
      summary: "List revisions of a deployment, newest first",
      tag: TAG,
      params,
      query: revisionListQuery,
      response: { status: 200, schema: listOf(revisionSchema) },
      handler: (c) => {
        const q = c.query;
        const d = svc.store.require(c.params.deployment_id, tenantOf(c));
        const p = paged(svc.store.revisions(d.id, commaList(q.status, REVISION_STATUSES, "status")), q);
        return json({ resources: p.resources.map(revisionToWire), offset: p.offset });
      },
    }),
    route({
      method: "GET",
      path: "/v2/deployments/:deployment_id/revisions/:revision_id",
      operationId: "get_revision_v2_deployments__deployment_id__revisions__revision_id__get",
      summary: "Get a revision (poll its status until DEPLOYED)",
      tag: TAG,
      params: revParams,
      response: { status: 200, schema: revisionSchema },
      handler: (c) => {
        const d = svc.store.require(c.params.deployment_id, tenantOf(c));
        return json(revisionToWire(svc.store.requireRevision(d.id, c.params.revision_id)));
      },
    }),
    route({
      method: "POST",
      path: "/v2/deployments/:deployment_id/revisions/:revision_id/redeploy",
      operationId: "redeploy_revision_v2_deployments__deployment_id__revisions__revision_id__redeploy_post",
      summary: "Redeploy a revision: a new revision with its config and secrets",
      tag: TAG,
      params: revParams,
      response: { status: 200, schema: deploymentSchema },
      handler: async (c) => json(wire(await svc.redeploy(c.params.deployment_id, c.params.revision_id, tenantOf(c)))),
    }),
  ];
}
