// The assistants family on LMDB: records, versions and the assistants' index, each write one
// write transaction (the read-modify-writes read inside it, so two PATCHes never reuse a version).
import { matchesFilter } from "../../domain/lifecycle.ts";
import type { Storage } from "../env.ts";
import { assistantVersionOf, patchedAssistant, type AssistantRecord, type AssistantVersionRecord, type JsonObject } from "../records.ts";
import { countAssistants, putAssistant, removeAssistant, searchAssistants } from "../indexes/assistants.ts";
import type { AssistantFilter, AssistantSort, AssistantWrite, AssistantsPort, Page, PageSpec, RunAssistant } from "../port.ts";

export class LmdbAssistants implements AssistantsPort {
  constructor(private readonly s: Storage) {}

  get(assistantId: string): Promise<AssistantRecord | undefined> {
    return Promise.resolve(this.s.assistants.get(assistantId));
  }

  /** Always read (a local, synchronous read): no cache, nothing for the run's create to check. */
  forRun(assistantId: string): Promise<RunAssistant | undefined> {
    const record = this.s.assistants.get(assistantId);
    return Promise.resolve(record === undefined ? undefined : { record });
  }

  async create(a: AssistantRecord): Promise<AssistantRecord | "exists"> {
    const ok = await this.s.root.transaction(() => {
      if (this.s.assistants.get(a.assistant_id)) return false;
      putAssistant(this.s, a, undefined);
      this.s.assistantVersions.put([a.assistant_id, a.version], assistantVersionOf(a));
      return true;
    });
    return ok ? a : "exists";
  }

  patch(assistantId: string, p: Partial<AssistantWrite>, now: string): Promise<AssistantRecord | undefined> {
    return this.s.root.transaction(() => {
      const a = this.s.assistants.get(assistantId);
      if (!a) return undefined;
      const next = patchedAssistant(a, p, this.maxVersion(assistantId) + 1, now);
      putAssistant(this.s, next, a);
      this.s.assistantVersions.put([assistantId, next.version], assistantVersionOf(next));
      return next;
    });
  }

  private maxVersion(id: string): number {
    let max = 0;
    for (const key of this.s.assistantVersions.getKeys({ start: [id, 0], end: [id, Number.MAX_SAFE_INTEGER] })) max = Math.max(max, key[1]);
    return max;
  }

  setLatest(assistantId: string, version: number, now: string): Promise<AssistantRecord | "no-version" | undefined> {
    return this.s.root.transaction(() => {
      const a = this.s.assistants.get(assistantId);
      if (!a) return undefined;
      const v = this.s.assistantVersions.get([assistantId, version]);
      if (!v) return "no-version" as const;
      const next: AssistantRecord = { ...a, config: v.config, metadata: v.metadata, name: v.name, version: v.version, updated_at: now };
      putAssistant(this.s, next, a);
      return next;
    });
  }

  delete(assistantId: string): Promise<boolean> {
    return this.s.root.transaction(() => {
      const a = this.s.assistants.get(assistantId);
      if (!a) return false;
      removeAssistant(this.s, a);
      for (const key of this.s.assistantVersions.getKeys({ start: [assistantId, 0], end: [assistantId, Number.MAX_SAFE_INTEGER] })) {
        this.s.assistantVersions.remove(key);
      }
      return true;
    });
  }

  versions(assistantId: string, q: { metadata?: JsonObject; offset: number; limit: number }): Promise<AssistantVersionRecord[]> {
    const all: AssistantVersionRecord[] = [];
    for (const { value } of this.s.assistantVersions.getRange({ start: [assistantId, Number.MAX_SAFE_INTEGER], end: [assistantId, 0], reverse: true })) {
      if (q.metadata && !matchesFilter(q.metadata, value.metadata)) continue;
      all.push(value);
    }
    return Promise.resolve(all.slice(q.offset, q.offset + q.limit));
  }

  search(q: AssistantFilter & PageSpec<AssistantSort>): Promise<Page<AssistantRecord>> {
    return searchAssistants(this.s, q);
  }

  count(f: AssistantFilter): Promise<number> {
    return countAssistants(this.s, f);
  }

  async ensureDefaults(defaults: readonly AssistantRecord[]): Promise<void> {
    for (const a of defaults) if (!this.s.assistants.get(a.assistant_id)) await this.create(a);
  }
}
