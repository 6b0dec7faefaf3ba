// Which clock stamps the cluster's rows. In a deployment it is the database's: every node compares
// lease and heartbeat expiries on one clock, so nodes' clocks never have to agree. Tests stamp
// with a ManualClock instead, so a lease expires when the test says, not after 15 real seconds.
import type { Clock } from "../util/clock.ts";

/** The moment to stamp a statement with; null means the database's own clock. */
export type Stamp = () => Date | null;

export const databaseStamp: Stamp = () => null;

export const clockStamp =
  (clock: Clock): Stamp =>
  () =>
    new Date(clock.now());

/** SQL for "now" given the stamp parameter (e.g. "$3"). */
export const nowSql = (param: string): string => `coalesce(${param}::timestamptz, statement_timestamp())`;

/** SQL for "now + ms" given the stamp and a millisecond count parameter. */
export const laterSql = (stampParam: string, msParam: string): string => `(${nowSql(stampParam)} + ${msParam}::float8 * interval '1 millisecond')`;
