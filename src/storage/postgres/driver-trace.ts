// The driver's side of the opt-in timeline trace (TROUPE_TRACE, src/util/trace.ts): every
// statement a pool is asked for, each checkout, each statement sent on a connection (by its
// backend pid) and its answer. Installed only when the trace is on (pool.ts): off, nothing wraps pg.
import pg from "pg";

type Traced = pg.Client & { processID: number };

const labelOf = (c: unknown): string => {
  const cfg = c as { name?: string; text?: string } | string;
  return typeof cfg === "string" ? cfg.slice(0, 60) : (cfg.name ?? cfg.text?.replace(/\s+/g, " ").trim().slice(0, 60) ?? "?");
};

export function traceDriver(t: (what: string) => void): void {
  const client = pg.Client.prototype as unknown as { query(this: Traced, c: unknown, ...rest: unknown[]): unknown };
  const clientQuery = client.query;
  let n = 0;
  client.query = function (this: Traced, c: unknown, ...rest: unknown[]) {
    const id = ++n;
    t(`pg.send #${id} c${this.processID} ${labelOf(c)}`);
    const answered = () => t(`pg.done #${id} c${this.processID}`);
    // answered through a callback (the pool's query, a query config's), else through the promise
    const last = rest.length - 1;
    if (last >= 0 && typeof rest[last] === "function") {
      const cb = rest[last] as (...a: unknown[]) => unknown;
      rest[last] = (...a: unknown[]) => (answered(), cb(...a));
    }
    const q = c as { callback?: (...a: unknown[]) => unknown };
    if (typeof c === "object" && c !== null && typeof q.callback === "function") {
      const cb = q.callback;
      q.callback = (...a: unknown[]) => (answered(), cb(...a));
    }
    const r = clientQuery.call(this, c, ...rest) as Promise<unknown> | undefined;
    if (r !== undefined && typeof r.then === "function") r.then(answered, () => t(`pg.fail #${id} c${this.processID}`));
    return r;
  };
  const pool = pg.Pool.prototype as unknown as { query(c: unknown, ...rest: unknown[]): unknown; connect(...a: unknown[]): unknown };
  const poolQuery = pool.query;
  pool.query = function (this: unknown, c: unknown, ...rest: unknown[]) {
    t(`pool.query ${labelOf(c)}`);
    return poolQuery.call(this, c, ...rest);
  };
  const connect = pool.connect;
  pool.connect = function (this: unknown, ...a: unknown[]) {
    t("pool.connect");
    return connect.apply(this, a);
  };
}
