// Random records and filters for the search property tests (test/unit/indexes.test.ts: the LMDB
// planner against a scan; test/storage-port/search-property.test.ts: Postgres against LMDB), with
// values that collide or nearly collide under careless encodings, and few distinct times so that
// sort ties happen.
import type { CronRecord, Json, JsonObject, ThreadStatus } from "../../src/storage/records.ts";

/** mulberry32: a small seeded PRNG, so a failing case can be replayed from its seed. */
export function rng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)];
  return { next, int, pick, chance: (p: number) => next() < p };
}
export type Rng = ReturnType<typeof rng>;

export const LONG = "x".repeat(250);
/** values that collide or nearly collide under careless encodings */
export const VALUES: Json[] = [
  "a",
  "b",
  "1",
  1,
  1.5,
  0,
  -0,
  true,
  false,
  null,
  [],
  ["a"],
  ["a", "b"],
  ["b", "a"],
  [{ k: 1, j: 2 }],
  { x: 1 },
  { x: 1, y: [2] },
  {},
  LONG,
  LONG + "y",
  "",
];
export const KEYS = ["user", "team", "n", "flag", "tags", "obj", "nul", "long", "k" + "z".repeat(230)];
export const STATUSES: ThreadStatus[] = ["idle", "busy", "interrupted", "error"];
/** few distinct times, so sort ties happen */
export const TIMES = Array.from({ length: 12 }, (_, i) => new Date(Date.UTC(2026, 0, 1, 0, 0, i % 7, (i * 37) % 3)).toISOString());

export function randomMetadata(r: Rng): JsonObject {
  const m: JsonObject = {};
  for (const k of KEYS) if (r.chance(0.45)) m[k] = k === "user" ? r.pick(["ann", "bob", "cy"]) : r.pick(VALUES);
  return m;
}

export function uuidOf(i: number): string {
  const hex = i.toString(16).padStart(12, "0");
  return `00000000-0000-4000-8000-${hex}`;
}

/** A metadata filter: mostly keys and values records have, sometimes impossible or nested ones. */
export function randomMetadataFilter(r: Rng): JsonObject {
  const f: JsonObject = {};
  const n = r.int(3);
  for (let i = 0; i < n; i++) {
    const k = r.pick(KEYS);
    f[k] = k === "user" && r.chance(0.7) ? r.pick(["ann", "bob", "cy", "dan"]) : r.pick(VALUES);
  }
  return f;
}

export function randomAuthFilter(r: Rng): Record<string, unknown> {
  const k = r.pick(KEYS);
  const v = r.pick(VALUES);
  switch (r.int(4)) {
    case 0:
      return { [k]: v };
    case 1:
      return { [k]: { $eq: v } };
    case 2:
      return { tags: { $contains: r.pick(["a", "b", ["a", "b"]]) } };
    default:
      return { user: r.pick(["ann", "bob"]), [k]: { $eq: v, $contains: "a" } };
  }
}

/** Reference order: sort field, then created_at, then id, all in the order given; nulls last. */
export function referenceSort<R>(items: R[], value: (r: R) => unknown, at: (r: R) => [string, string], order: "asc" | "desc"): R[] {
  const dir = order === "asc" ? 1 : -1;
  return [...items].sort((a, b) => {
    const va = value(a) as string | null;
    const vb = value(b) as string | null;
    if (va !== vb) {
      if (va == null) return vb == null ? 0 : 1;
      if (vb == null) return -1;
      return (va < vb ? -1 : 1) * dir;
    }
    const [ca, ia] = at(a);
    const [cb, ib] = at(b);
    if (ca !== cb) return (ca < cb ? -1 : 1) * dir;
    return ia === ib ? 0 : (ia < ib ? -1 : 1) * dir;
  });
}

/** A cron record of the index and search tests: assistants 1-3, threads 50/51 or none, `metadata` given. */
export function randomCron(r: Rng, i: number, metadata: JsonObject): CronRecord {
  return {
    cron_id: uuidOf(10_000 + i),
    assistant_id: r.pick([uuidOf(1), uuidOf(2), uuidOf(3)]),
    thread_id: r.chance(0.5) ? r.pick([uuidOf(50), uuidOf(51)]) : null,
    on_run_completed: null,
    end_time: r.chance(0.5) ? r.pick(TIMES) : null,
    schedule: "* * * * *",
    timezone: null,
    created_at: r.pick(TIMES),
    updated_at: r.pick(TIMES),
    payload: {},
    user_id: null,
    next_run_date: r.chance(0.8) ? r.pick(TIMES) : null,
    metadata,
    enabled: r.chance(0.7),
  };
}
