// `troupe dev`'s readable log lines, made from the JSON line pino built (dev only: the parse
// costs more than the line, which does not matter at development rates).
const LEVEL_TEXT: Record<string, string> = { fatal: "FATAL", error: "ERROR", warn: "WARN ", info: "INFO ", debug: "DEBUG", trace: "TRACE" };
const OMIT = new Set(["level", "time", "msg", "thread", "component", "err"]);

export function prettyLine(jsonLine: string): string {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(jsonLine) as Record<string, unknown>;
  } catch {
    return jsonLine;
  }
  const time = typeof o.time === "string" ? o.time.slice(11, 23) : "";
  const level = LEVEL_TEXT[String(o.level)] ?? String(o.level).toUpperCase();
  const where = o.component ? `${String(o.component)}` : String(o.thread ?? "");
  let line = `${time} ${level} [${where}] ${String(o.msg ?? "")}`;
  for (const k in o) {
    if (OMIT.has(k) || o[k] === undefined) continue;
    const v = o[k];
    line += ` ${k}=${typeof v === "string" && !/\s/.test(v) ? v : JSON.stringify(v)}`;
  }
  const err = o.err as { stack?: string; message?: string } | undefined;
  if (err) line += `\n  ${err.stack ?? err.message ?? JSON.stringify(err)}`;
  return `${line}\n`;
}
