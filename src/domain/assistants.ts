// Assistants as the API and startup use them, over the storage port: ids, defaults, if_exists
// and the errors the routes answer. Records live in the storage's assistants family.
import { TroupeError, notFound, assistantNotFound } from "../errors.ts";
import { defaultAssistantId, uuid7 } from "../util/ids.ts";
import type { AssistantRecord, AssistantVersionRecord, Json, JsonObject, RunnableConfigJson } from "../storage/records.ts";
import type { AssistantFilter, AssistantSort, AssistantsPort, Page, PageSpec } from "../storage/port.ts";

export type { AssistantFilter };
export type AssistantSearch = AssistantFilter & PageSpec<AssistantSort>;

const nowIso = (): string => new Date().toISOString();

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

export class AssistantStore {
  constructor(private readonly port: AssistantsPort) {}

  get(id: string): Promise<AssistantRecord | undefined> {
    return this.port.get(id);
  }

  async mustGet(id: string): Promise<AssistantRecord> {
    const a = await this.port.get(id);
    if (!a) throw assistantNotFound();
    return a;
  }

  /** Default assistant of every graph; an existing (possibly edited) one is kept as is. */
  ensureDefaults(graphIds: Iterable<string>, configs: Record<string, JsonObject> = {}): Promise<void> {
    const now = nowIso();
    const defaults = [...graphIds].map((graphId): AssistantRecord => {
      const { context, ...config } = configs[graphId] ?? {};
      return {
        assistant_id: defaultAssistantId(graphId),
        version: 1,
        config: config as RunnableConfigJson,
        context: (context as Json) ?? {},
        created_at: now,
        updated_at: now,
        graph_id: graphId,
        metadata: { created_by: "system" },
        name: graphId,
        description: null,
      };
    });
    return this.port.ensureDefaults(defaults);
  }

  async create(c: AssistantCreate): Promise<AssistantRecord> {
    const id = c.assistant_id ?? uuid7();
    const existing = await this.port.get(id);
    if (existing) {
      if (c.if_exists === "do_nothing") return existing;
      throw new TroupeError("CONFLICT", "Assistant already exists");
    }
    const now = nowIso();
    const created = await this.port.create({
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
    });
    if (created === "exists") {
      if (c.if_exists === "do_nothing") return this.mustGet(id);
      throw new TroupeError("CONFLICT", "Assistant already exists");
    }
    return created;
  }

  /** Every patch, even an empty one, creates version max+1 (upstream behaviour). */
  async patch(id: string, p: AssistantPatch): Promise<AssistantRecord> {
    const next = await this.port.patch(id, p, nowIso());
    if (!next) throw assistantNotFound();
    return next;
  }

  async setLatest(id: string, version: number): Promise<AssistantRecord> {
    const next = await this.port.setLatest(id, version, nowIso());
    if (next === undefined) throw assistantNotFound();
    if (next === "no-version") throw notFound("Assistant version not found");
    return next;
  }

  async delete(id: string): Promise<void> {
    if (!(await this.port.delete(id))) throw assistantNotFound();
  }

  versions(id: string, q: { metadata?: JsonObject; limit: number; offset: number }): Promise<AssistantVersionRecord[]> {
    return this.port.versions(id, q);
  }

  search(q: AssistantSearch): Promise<Page<AssistantRecord>> {
    return this.port.search(q);
  }

  count(f: AssistantFilter): Promise<number> {
    return this.port.count(f);
  }
}
