// Sorting and paging of search results, and the pagination headers the SDK reads.
// Unlike upstream (reference §4.2 quirk), X-Pagination-Next is sent whenever a next page exists.

export function sortBy<T>(items: T[], key: keyof T, order: "asc" | "desc"): T[] {
  const dir = order === "asc" ? 1 : -1;
  return items.sort((a, b) => {
    const x = a[key];
    const y = b[key];
    return x === y ? 0 : (x as unknown as string) < (y as unknown as string) ? -dir : dir;
  });
}

export function page<T>(items: T[], offset: number, limit: number): { items: T[]; headers: Record<string, string> } {
  const slice = items.slice(offset, offset + limit);
  return { items: slice, headers: pageHeaders({ items: slice, total: items.length }, offset) };
}

/** Headers of a page that starts at `offset`, of `total` matches in all. */
export function pageHeaders(p: { items: readonly unknown[]; total: number }, offset: number): Record<string, string> {
  const headers: Record<string, string> = { "x-pagination-total": String(p.total) };
  if (offset + p.items.length < p.total) headers["x-pagination-next"] = String(offset + p.items.length);
  return headers;
}

export function select<T extends object>(items: T[], fields: string[] | undefined): Partial<T>[] {
  if (!fields?.length) return items;
  return items.map((it) => Object.fromEntries(fields.filter((f) => f in it).map((f) => [f, (it as Record<string, unknown>)[f]])) as Partial<T>);
}
