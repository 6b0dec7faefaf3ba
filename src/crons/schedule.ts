// Cron expressions and timezones, checked and evaluated with croner: the API validates with
// these at creation/update and computes `next_run_date` the same way the scheduler does.
import { Cron } from "croner";
import { validationError } from "../errors.ts";
import type { CronRecord } from "../storage/records.ts";

/** Schedules without a timezone are read in UTC, never in the server's local time. */
export const DEFAULT_TIMEZONE = "UTC";

/** Throws a VALIDATION error (loc body.timezone) unless `tz` is an IANA zone the runtime knows. */
export function checkTimezone(tz: string): void {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
  } catch {
    throw validationError([{ loc: ["body", "timezone"], msg: `Invalid timezone "${tz}": use an IANA name such as "America/New_York"`, type: "value_error" }]);
  }
}

/** Throws a VALIDATION error (loc body.schedule) carrying croner's message for a bad expression. */
export function checkSchedule(schedule: string, tz: string | null): void {
  try {
    new Cron(schedule, { paused: true, timezone: tz ?? DEFAULT_TIMEZONE }).stop();
  } catch (err) {
    throw validationError([{ loc: ["body", "schedule"], msg: (err as Error).message, type: "value_error" }]);
  }
}

/** The croner options a cron record maps to (shared by the scheduler's jobs and nextRunDate). */
export function cronerOptions(rec: Pick<CronRecord, "timezone" | "end_time">): { timezone: string; stopAt?: Date } {
  return { timezone: rec.timezone ?? DEFAULT_TIMEZONE, ...(rec.end_time ? { stopAt: new Date(rec.end_time) } : {}) };
}

/** True while the cron may still fire: enabled and not past its end_time. */
export function isLive(rec: Pick<CronRecord, "enabled" | "end_time">, now = Date.now()): boolean {
  return rec.enabled && (rec.end_time === null || Date.parse(rec.end_time) > now);
}

/** Next fire time (ISO) after now, or null when disabled, ended or the pattern never matches again. */
export function nextRunDate(rec: Pick<CronRecord, "schedule" | "timezone" | "end_time" | "enabled">): string | null {
  if (!isLive(rec)) return null;
  const probe = new Cron(rec.schedule, { ...cronerOptions(rec), paused: true });
  try {
    return probe.nextRun()?.toISOString() ?? null;
  } finally {
    probe.stop();
  }
}
