// Input JSON schema of an assistant's graph (src/api/graph-schemas.ts, without waiting for a
// TypeScript extraction), cached per assistant version: MCP tool listings and A2A message checks
// need it per request.
import type { AppContext } from "../server/context.ts";
import type { AssistantRecord, JsonObject } from "../storage/records.ts";
import { isRecord } from "./jsonrpc.ts";
import { graphSchemas } from "./graph-schemas.ts";
import { componentLog } from "../log/logger.ts";

const log = componentLog("api");

const MAX_ENTRIES = 1_000;

export interface InputSchemas {
  /** the graph's input schema without `$schema`; null when the graph does not expose one or describing failed */
  of(assistant: AssistantRecord): Promise<JsonObject | null>;
}

export function inputSchemas(app: AppContext): InputSchemas {
  const cache = new Map<string, Promise<JsonObject | null>>();
  const fetch = async (a: AssistantRecord): Promise<JsonObject | null> => {
    // never waits for a TypeScript extraction: its answer when one already ran, else the channels
    const schema = (await graphSchemas(app, a, "known")).input_schema;
    if (!isRecord(schema)) return null;
    const { $schema: _drop, ...rest } = schema as JsonObject;
    return rest;
  };
  return {
    of(a) {
      if (!app.graphIds.has(a.graph_id)) return Promise.resolve(null);
      const key = `${a.assistant_id}@${a.version}`;
      let p = cache.get(key);
      if (!p) {
        if (cache.size >= MAX_ENTRIES) cache.delete(cache.keys().next().value as string);
        p = fetch(a).catch((err: unknown) => {
          cache.delete(key); // a failing graph may load next time (e.g. after a worker restart)
          log.warn(`input schema of assistant ${a.assistant_id} unavailable: ${(err as Error).message}`, { assistant_id: a.assistant_id });
          return null;
        });
        cache.set(key, p);
      }
      return p;
    },
  };
}

/** Does a graph input schema have a `messages` key? Unknown schemas are given the benefit of the doubt. */
export function acceptsMessages(schema: JsonObject | null): boolean {
  if (!schema) return true;
  const props = schema.properties;
  if (!isRecord(props)) return true;
  return "messages" in props;
}
