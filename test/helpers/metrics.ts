// Reads a server's /metrics with a real Prometheus text-format parser (parse-prometheus-text-format,
// prom2json's output shape) and looks series up by name and labels. That parser folds a histogram's
// series into one (it keeps only unlabelled histograms whole), so histogram and summary families are
// also read a second time as untyped samples (`x_bucket`, `x_sum`, `x_count`, each with its labels).
import { createRequire } from "node:module";

interface ParsedSample {
  value?: string;
  labels?: Record<string, string>;
  buckets?: Record<string, string>;
  count?: string;
  sum?: string;
}
interface ParsedFamily {
  name: string;
  help: string;
  type: "COUNTER" | "GAUGE" | "HISTOGRAM" | "SUMMARY" | "UNTYPED";
  metrics: ParsedSample[];
}

const parse = createRequire(import.meta.url)("parse-prometheus-text-format") as (text: string) => ParsedFamily[];

export interface Scrape {
  text: string;
  families: ParsedFamily[];
  family(name: string): ParsedFamily | undefined;
  /** the samples of `name` whose labels include `labels` */
  samples(name: string, labels?: Record<string, string>): ParsedSample[];
  /** value of the one sample of a counter/gauge matching `labels` (0 when absent) */
  value(name: string, labels?: Record<string, string>): number;
  /** observation count of a histogram's series matching `labels` (its `_count` samples), summed (0 when absent) */
  count(name: string, labels?: Record<string, string>): number;
}

export function parseMetrics(text: string): Scrape {
  const families = parse(text);
  const flat = parse(text.replace(/^# TYPE (\S+) (histogram|summary)$/gm, "# TYPE $1 untyped"));
  const family = (name: string) => families.find((f) => f.name === name);
  const samples = (name: string, labels: Record<string, string> = {}) =>
    flat
      .filter((f) => f.name === name)
      .flatMap((f) => f.metrics)
      .filter((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  return {
    text,
    families,
    family,
    samples,
    value(name, labels) {
      const found = samples(name, labels);
      if (found.length > 1) throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}`);
      return found.length === 0 ? 0 : Number(found[0].value);
    },
    count(name, labels) {
      return samples(`${name}_count`, labels).reduce((n, m) => n + Number(m.value ?? 0), 0);
    },
  };
}

export async function scrape(url: string, headers: Record<string, string> = {}): Promise<Scrape> {
  const res = await fetch(`${url}/metrics`, { headers });
  if (res.status !== 200) throw new Error(`GET /metrics: HTTP ${res.status} ${await res.text()}`);
  const type = res.headers.get("content-type") ?? "";
  if (!type.startsWith("text/plain")) throw new Error(`GET /metrics: content-type ${type}`);
  return parseMetrics(await res.text());
}
