// Assistant records: written only by the HTTP thread (no actor owns them), read everywhere.
// Writes go through putAssistant/removeAssistant, which keep the assistants' index.
import { TroupeError, notFound, assistantNotFound } from "../errors.ts";
import { defaultAssistantId, uuid7 } from "../util/ids.ts";
import { matchesFilter } from "../domain/lifecycle.ts";
import type { Storage } from "./env.ts";
import type { AssistantRecord, AssistantVersionRecord, Json, JsonObject, RunnableConfigJson } from "./records.ts";
import { nowIso } from "./records.ts";
import { countAssistants, putAssistant, removeAssistant, searchAssistants, type AssistantFilter, type AssistantSearch } from "./indexes/assistants.ts";
import type { Page } from "./port.ts";

export type { AssistantFilter, AssistantSearch };

export interface AssistantCreate {
  assistant_id?: string;
  graph_id: string;
  config?: RunnableConfigJson;
  context?: Json;
  metadata?: JsonObject;
  if_exists?: "raise" | "do_nothing";
  name?: string;
  description?: string | null;
}

export interface AssistantPatch {
  graph_id?: string;
  config?: RunnableConfigJson;
  context?: Json;
  metadata?: JsonObject;
  name?: string;
  description?: string | null;
}

const versionOf = (a: AssistantRecord): AssistantVersionRecord => ({
  assistant_id: a.assistant_id,
  version: a.version,
  graph_id: a.graph_id,
  config: a.config,
  context: a.context,
  metadata: a.metadata,
  name: a.name,
  description: a.description,
  created_at: a.updated_at,
});

export class AssistantStore {
  constructor(private readonly s: Storage) {}

  get(id: string): AssistantRecord | undefined {
    return this.s.assistants.get(id);
  }

  mustGet(id: string): AssistantRecord {
    const a = this.get(id);
    if (!a) throw assistantNotFound();
    return a;
  }

  /** Default assistant of every graph; an existing (possibly edited) one is kept as is. */
  async ensureDefaults(graphIds: Iterable<string>, configs: Record<string, JsonObject> = {}): Promise<void> {
    for (const graphId of graphIds) {
      const id = defaultAssistantId(graphId);
      if (this.get(id)) continue;
      const { context, ...config } = configs[graphId] ?? {};
      await this.create({ assistant_id: id, graph_id: graphId, name: graphId, metadata: { created_by: "system" }, config: config as RunnableConfigJson, context: (context as Json) ?? {}, if_exists: "do_nothing" });
    }
  }

  async create(c: AssistantCreate): Promise<AssistantRecord> {
    const id = c.assistant_id ?? uuid7();
    const existing = this.get(id);
    if (existing) {
      if (c.if_exists === "do_nothing") return existing;
      throw new TroupeError("CONFLICT", "Assistant already exists");
    }
    const now = nowIso();
    const a: AssistantRecord = {
      assistant_id: id,
      version: 1,
      config: c.config ?? {},
      context: c.context ?? {},
      created_at: now,
      updated_at: now,
      graph_id: c.graph_id,
      metadata: c.metadata ?? {},
      name: c.name ?? "Untitled",
      description: c.description ?? null,
    };
    const ok = await this.s.root.transaction(() => {
      if (this.s.assistants.get(id)) return false;
      putAssistant(this.s, a, undefined);
      this.s.assistantVersions.put([id, 1], versionOf(a));
      return true;
    });
    if (!ok) {
      if (c.if_exists === "do_nothing") return this.mustGet(id);
      throw new TroupeError("CONFLICT", "Assistant already exists");
    }
    return a;
  }

  /** Every patch, even an empty one, creates version max+1 (upstream behaviour). */
  async patch(id: string, p: AssistantPatch): Promise<AssistantRecord> {
    return this.s.root.transaction(() => {
      const a = this.mustGet(id);
      const latest = this.maxVersion(id);
      const next: AssistantRecord = {
        ...a,
        graph_id: p.graph_id ?? a.graph_id,
        config: p.config ?? a.config,
        context: p.context !== undefined ? p.context : a.context,
        metadata: p.metadata ? { ...a.metadata, ...p.metadata } : a.metadata,
        name: p.name ?? a.name,
        description: p.description !== undefined ? p.description : a.description,
        version: latest + 1,
        updated_at: nowIso(),
      };
      putAssistant(this.s, next, a);
      this.s.assistantVersions.put([id, next.version], versionOf(next));
      return next;
    });
  }

  private maxVersion(id: string): number {
    let max = 0;
    for (const key of this.s.assistantVersions.getKeys({ start: [id, 0], end: [id, Number.MAX_SAFE_INTEGER], reverse: false })) {
      max = Math.max(max, key[1]);
    }
    return max;
  }

  async setLatest(id: string, version: number): Promise<AssistantRecord> {
    return this.s.root.transaction(() => {
      const a = this.mustGet(id);
      const v = this.s.assistantVersions.get([id, version]);
      if (!v) throw notFound("Assistant version not found");
      const next: AssistantRecord = { ...a, config: v.config, metadata: v.metadata, name: v.name, version: v.version, updated_at: nowIso() };
      putAssistant(this.s, next, a);
      return next;
    });
  }

  async delete(id: string): Promise<void> {
    await this.s.root.transaction(() => {
      removeAssistant(this.s, this.mustGet(id));
      for (const key of this.s.assistantVersions.getKeys({ start: [id, 0], end: [id, Number.MAX_SAFE_INTEGER] })) {
        this.s.assistantVersions.remove(key);
      }
    });
  }

  versions(id: string, q: { metadata?: JsonObject; limit: number; offset: number }): AssistantVersionRecord[] {
    const all: AssistantVersionRecord[] = [];
    for (const { value } of this.s.assistantVersions.getRange({ start: [id, Number.MAX_SAFE_INTEGER], end: [id, 0], reverse: true })) {
      if (q.metadata && !matchesFilter(q.metadata, value.metadata)) continue;
      all.push(value);
    }
    return all.slice(q.offset, q.offset + q.limit);
  }

  /** A page of matching assistants and how many match (indexes/assistants.ts). */
  search(q: AssistantSearch): Promise<Page<AssistantRecord>> {
    return searchAssistants(this.s, q);
  }

  count(f: AssistantFilter): Promise<number> {
    return countAssistants(this.s, f);
  }
}
