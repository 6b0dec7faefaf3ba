// Store authorization (reference §11.2, store rows): fires store:* events, applies the handler's
// changes to the operation, and enforces the filter on `{...item.value, namespace, key}`.
// Filtered search and namespace listing scan at most MAX_SCAN entries, then refuse (400).
import type { ListNamespacesOperation, MatchCondition, SearchOperation } from "@langchain/langgraph-checkpoint";
import { badRequest } from "../errors.ts";
import type { AuthInfo } from "../http/types.ts";
import type { JsonObject, StoreItemRecord } from "../storage/records.ts";
import type { ItemStore } from "../storage/port.ts";
import { matchesAuthFilter, storeMatchTarget } from "./filter.ts";
import { AuthHttpError } from "./http-error.ts";
import type { AuthRuntime } from "./runtime.ts";
import type { AuthFilter } from "./types.ts";

export const MAX_SCAN = 10_000;
const SCAN_LIMIT_MESSAGE = "Authenticated store query exceeded maximum scan limit. Narrow the namespace or filters.";

export interface StoreItemRef {
  namespace: string[];
  key: string;
}
export interface StorePutOp extends StoreItemRef {
  value: JsonObject;
}

/** One per store route group; every method is a pass-through when the request is not authenticated. */
export class StoreAccess {
  constructor(
    private readonly runtime: AuthRuntime | undefined,
    private readonly store: ItemStore,
  ) {}

  /** The put to perform (the handler may have changed namespace, key or value). */
  async put(info: AuthInfo | undefined, op: StorePutOp): Promise<StorePutOp> {
    if (!this.runtime || !info) return op;
    const value = { namespace: [...op.namespace], key: op.key, value: op.value };
    const filter = await this.runtime.authorize(info, "store:put", value);
    const next = { ...itemRef(value), value: isObject(value.value) ? (value.value as JsonObject) : op.value };
    if (filter) {
      const existing = await this.store.item(next.namespace, next.key);
      if (existing && !matchesAuthFilter(filter, storeMatchTarget(existing.namespace, existing.key, existing.value)))
        throw new AuthHttpError(404, "Item not found");
      if (!matchesAuthFilter(filter, storeMatchTarget(next.namespace, next.key, next.value))) throw new AuthHttpError(403, "Not authorized");
    }
    return next;
  }

  /** The item, null when absent; a visible-to-others item → 404. */
  async get(info: AuthInfo | undefined, ref: StoreItemRef): Promise<StoreItemRecord | null> {
    if (!this.runtime || !info) return this.store.item(ref.namespace, ref.key);
    const value = { namespace: [...ref.namespace], key: ref.key };
    const filter = await this.runtime.authorize(info, "store:get", value);
    const r = itemRef(value);
    const item = await this.store.item(r.namespace, r.key);
    if (item && !matchesAuthFilter(filter, storeMatchTarget(item.namespace, item.key, item.value))) throw new AuthHttpError(404, "Item not found");
    return item;
  }

  /** The item to delete; someone else's item → 404, an absent one the filter would not allow → 403. */
  async delete(info: AuthInfo | undefined, ref: StoreItemRef): Promise<StoreItemRef> {
    if (!this.runtime || !info) return ref;
    const value = { namespace: [...ref.namespace], key: ref.key };
    const filter = await this.runtime.authorize(info, "store:delete", value);
    const r = itemRef(value);
    if (filter) {
      const item = await this.store.item(r.namespace, r.key);
      if (item && !matchesAuthFilter(filter, storeMatchTarget(item.namespace, item.key, item.value))) throw new AuthHttpError(404, "Item not found");
      if (!item && !matchesAuthFilter(filter, storeMatchTarget(r.namespace, r.key))) throw new AuthHttpError(403, "Not authorized");
    }
    return r;
  }

  async search(info: AuthInfo | undefined, op: SearchOperation): Promise<StoreItemRecord[]> {
    if (!this.runtime || !info) return this.store.searchItems(op);
    const value = { namespace: [...op.namespacePrefix], filter: op.filter, limit: op.limit, offset: op.offset, query: op.query };
    const filter = await this.runtime.authorize(info, "store:search", value);
    const next: SearchOperation = {
      namespacePrefix: strings(value.namespace) ?? op.namespacePrefix,
      filter: isObject(value.filter) ? value.filter : undefined,
      limit: typeof value.limit === "number" ? value.limit : op.limit,
      offset: typeof value.offset === "number" ? value.offset : op.offset,
      query: typeof value.query === "string" ? value.query : undefined,
    };
    if (!filter) return this.store.searchItems(next);
    const limit = next.limit ?? 10;
    const offset = next.offset ?? 0;
    if (next.query) {
      // ranked: every allowed item is a candidate (the scan limit still applies)
      const allowed = await this.scan(next.namespacePrefix, next.filter, filter, (item, out: StoreItemRecord[]) => (out.push(item), false));
      return (await this.store.rank(allowed, next.query)).slice(offset, offset + limit);
    }
    return (
      await this.scan(next.namespacePrefix, next.filter, filter, (item, out: StoreItemRecord[]) => {
        out.push(item);
        return out.length >= offset + limit;
      })
    ).slice(offset, offset + limit);
  }

  async namespaces(info: AuthInfo | undefined, op: ListNamespacesOperation): Promise<string[][]> {
    if (!this.runtime || !info) return this.store.namespacesOf(op);
    const conditions = op.matchConditions ?? [];
    const value = {
      namespace: conditions.find((c) => c.matchType === "prefix")?.path,
      suffix: conditions.find((c) => c.matchType === "suffix")?.path,
      max_depth: op.maxDepth,
      limit: op.limit,
      offset: op.offset,
    };
    const filter = await this.runtime.authorize(info, "store:list_namespaces", value);
    const prefix = strings(value.namespace);
    const suffix = strings(value.suffix);
    const next: ListNamespacesOperation = {
      matchConditions: [
        ...(prefix ? [{ matchType: "prefix" as const, path: prefix }] : []),
        ...(suffix ? [{ matchType: "suffix" as const, path: suffix }] : []),
      ],
      maxDepth: typeof value.max_depth === "number" ? value.max_depth : undefined,
      limit: typeof value.limit === "number" ? value.limit : op.limit,
      offset: typeof value.offset === "number" ? value.offset : op.offset,
    };
    if (!filter) return this.store.namespacesOf(next);
    return this.filteredNamespaces(next, filter);
  }

  /** Namespaces holding at least one item the filter allows, in key order, truncated and de-duplicated. */
  private async filteredNamespaces(op: ListNamespacesOperation, filter: AuthFilter): Promise<string[][]> {
    const conditions = op.matchConditions ?? [];
    const limit = op.limit ?? 100;
    const offset = op.offset ?? 0;
    const head = literalHead(conditions.find((c) => c.matchType === "prefix")?.path ?? []);
    const seen = new Set<string>();
    return (
      await this.scan(head, undefined, filter, (item, out: string[][]) => {
        if (!conditions.every((c) => conditionMatches(c, item.namespace))) return false;
        const shown = op.maxDepth === undefined ? item.namespace : item.namespace.slice(0, op.maxDepth);
        const id = JSON.stringify(shown);
        if (seen.has(id)) return false;
        seen.add(id);
        out.push(shown);
        return out.length >= offset + limit;
      })
    ).slice(offset, offset + limit);
  }

  /** Feeds allowed items to `take` until it says the page is full; scanning past MAX_SCAN entries → 400. */
  private async scan<T>(
    prefix: string[],
    valueFilter: Record<string, unknown> | undefined,
    filter: AuthFilter,
    take: (item: StoreItemRecord, out: T[]) => boolean,
  ): Promise<T[]> {
    const out: T[] = [];
    const items = await this.store.scanItems({ namespacePrefix: prefix, filter: valueFilter, limit: MAX_SCAN + 1, offset: 0 });
    for (let i = 0; i < items.length; i++) {
      if (i >= MAX_SCAN) throw badRequest(SCAN_LIMIT_MESSAGE);
      const item = items[i];
      if (matchesAuthFilter(filter, storeMatchTarget(item.namespace, item.key, item.value)) && take(item, out)) return out;
    }
    return out;
  }
}

function itemRef(v: { namespace: unknown; key: unknown }): StoreItemRef {
  const namespace = strings(v.namespace);
  if (!namespace || typeof v.key !== "string")
    throw new AuthHttpError(500, "Auth handler left the store operation without a string[] namespace and a string key");
  return { namespace, key: v.key };
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const strings = (v: unknown): string[] | undefined => (Array.isArray(v) && v.every((s) => typeof s === "string") ? [...v] : undefined);

function literalHead(path: readonly string[]): string[] {
  const i = path.indexOf("*");
  return i < 0 ? [...path] : path.slice(0, i);
}

function conditionMatches(c: MatchCondition, ns: readonly string[]): boolean {
  if (c.path.length > ns.length) return false;
  const at = c.matchType === "prefix" ? 0 : ns.length - c.path.length;
  return c.path.every((p, i) => p === "*" || p === ns[at + i]);
}
