// The JSON schemas of an assistant's graph (GET /assistants/{id}/schemas and /subgraphs, MCP and
// A2A input schemas), chosen as the JS server chooses (reference §12.4): the graph's runtime
// schemas (zod, StateSchema) when it has any; otherwise the ones its TypeScript types give (static
// extraction, src/schemas/: what Annotation graphs get upstream); and for a kind neither gives,
// what its state channels say (names, messages lists). Null only when nothing can say.
import { graphNotRegistered } from "../errors.ts";
import type { DescribedSchemas, GraphSchemas } from "../bridge/messages.ts";
import type { KindSchemas, StaticGraphSchemas } from "../schemas/messages.ts";
import type { AppContext } from "../server/context.ts";
import type { AssistantRecord, JsonObject } from "../storage/records.ts";

export interface SchemasReply extends GraphSchemas {
  graph_id: string;
}

/**
 * How long a caller waits for an extraction: `wait` (the assistants routes, as upstream), or
 * `known` (MCP tool lists, A2A checks: only an answer already at hand, never a checker run).
 */
export type StaticMode = "wait" | "known";

function assertRegistered(app: AppContext, a: AssistantRecord): void {
  if (!app.graphIds.has(a.graph_id)) throw graphNotRegistered(a.graph_id, a.assistant_id);
}

export async function graphSchemas(app: AppContext, a: AssistantRecord, mode: StaticMode = "wait"): Promise<SchemasReply> {
  assertRegistered(app, a);
  const described = (await app.pool.request({
    type: "graph.describe",
    assistant: a,
    what: "schemas",
    xray: false,
    recurse: false,
  })) as unknown as DescribedSchemas;
  if (described.runtime) return { graph_id: a.graph_id, ...withChannels(described.runtime, described.channels) };
  const found = await staticOf(app, a.graph_id, mode);
  return { graph_id: a.graph_id, ...withChannels(fromStatic(found && rootOf(found)), described.channels) };
}

/** Each subgraph (by namespace, `|`-joined) with its schemas; the static ones under `<export>|<namespace>`. */
export async function subgraphSchemas(
  app: AppContext,
  a: AssistantRecord,
  namespace: string | undefined,
  recurse: boolean,
): Promise<Record<string, SchemasReply>> {
  assertRegistered(app, a);
  const described = (await app.pool.request({ type: "graph.describe", assistant: a, what: "subgraphs", xray: false, namespace, recurse })) as unknown as Record<
    string,
    DescribedSchemas
  >;
  const out: Record<string, SchemasReply> = {};
  let found: StaticGraphSchemas | null | undefined;
  for (const [ns, own] of Object.entries(described)) {
    if (own.runtime) {
      out[ns] = { graph_id: a.graph_id, ...withChannels(own.runtime, own.channels) };
      continue;
    }
    found ??= await staticOf(app, a.graph_id, "wait");
    const root = found ? rootOf(found) : undefined;
    // not found by the extractor (a subgraph it cannot see, e.g. built by a function): its own
    // channels when they say anything, else the root's types (upstream answers the root's)
    const typed = found && root ? found[`${root[0]}|${ns}`] : undefined;
    const kinds = typed ?? (saysAnything(own.channels) ? undefined : root?.[1]);
    out[ns] = { graph_id: a.graph_id, ...withChannels(fromStatic(kinds), own.channels) };
  }
  return out;
}

async function staticOf(app: AppContext, graphId: string, mode: StaticMode): Promise<StaticGraphSchemas | null> {
  if (mode === "known") return app.staticSchemas.peek(graphId) ?? null;
  return app.staticSchemas.of(graphId);
}

/** The root graph's entry: the one key without `|`. */
function rootOf(found: StaticGraphSchemas): [string, KindSchemas] | undefined {
  return Object.entries(found).find(([name]) => !name.includes("|"));
}

function fromStatic(kinds: KindSchemas | [string, KindSchemas] | undefined | null): GraphSchemas {
  const k = Array.isArray(kinds) ? kinds[1] : (kinds ?? {});
  const config = k.config ?? null;
  return { input_schema: k.input ?? null, output_schema: k.output ?? null, state_schema: k.state ?? null, config_schema: config, context_schema: config };
}

function withChannels(primary: GraphSchemas, channels: GraphSchemas): GraphSchemas {
  const pick = (key: keyof GraphSchemas): JsonObject | null => primary[key] ?? channels[key];
  return {
    input_schema: pick("input_schema"),
    output_schema: pick("output_schema"),
    state_schema: pick("state_schema"),
    config_schema: pick("config_schema"),
    context_schema: pick("context_schema"),
  };
}

function saysAnything(s: GraphSchemas): boolean {
  return Object.values(s).some((v) => v !== null);
}
