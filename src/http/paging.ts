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
  const headers: Record<string, string> = { "x-pagination-total": String(items.length) };
  if (offset + slice.length < items.length) headers["x-pagination-next"] = String(offset + slice.length);
  return { items: slice, headers };
}

export function select<T extends object>(items: T[], fields: string[] | undefined): Partial<T>[] {
  if (!fields?.length) return items;
  return items.map((it) => Object.fromEntries(fields.filter((f) => f in it).map((f) => [f, (it as Record<string, unknown>)[f]])) as Partial<T>);
}
