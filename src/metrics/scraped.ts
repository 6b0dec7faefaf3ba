// prom-client metrics whose values are read when /metrics is scraped, from numbers kept elsewhere
// (hot-path cells, the shards' shared board, counters of other threads): prom-client still does
// the exposition (names, escaping, the text and JSON formats), and recording a value costs no label
// hashing. A series' labels are handed to prom-client as one object kept across scrapes
// (`sharedLabels`, whose text prom-client caches per object), so a scrape formats each label set
// once, not on every scrape and every histogram bucket.
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { HistogramValues } from "../bridge/shard-metrics.ts";

export type Labels<L extends string> = Partial<Record<L, string | number>>;
export interface Sample<L extends string> {
  labels: Labels<L>;
  value: number;
}
export interface HistogramSample<L extends string> {
  labels: Labels<L>;
  values: HistogramValues;
}

interface Spec<L extends string> {
  name: string;
  help: string;
  labelNames?: readonly L[];
  registry: Registry;
  /** labels every series of the metric carries (the server's `node`) */
  constLabels: Record<string, string>;
}

/** One value as prom-client's registry formats it. */
interface Value {
  value: number;
  labels: Record<string, string | number>;
  sharedLabels?: Record<string, string | number>;
  metricName?: string;
}

const NO_LABELS: Record<string, string | number> = Object.freeze({}) as Record<string, string | number>;

/** The label objects of a metric's series, one per distinct label set, kept across scrapes. */
class LabelSets {
  private readonly sets = new Map<string, Record<string, string | number>>();

  constructor(
    private readonly names: readonly string[],
    private readonly constLabels: Record<string, string>,
  ) {}

  of(labels: Record<string, string | number | undefined>): Record<string, string | number> {
    let key = "";
    for (const n of this.names) key += `${labels[n] ?? ""}\u0000`;
    let set = this.sets.get(key);
    if (set === undefined) {
      set = {};
      for (const n of this.names) if (labels[n] !== undefined) set[n] = labels[n]!;
      Object.assign(set, this.constLabels);
      this.sets.set(key, set);
    }
    return set;
  }
}

const config = <L extends string>(s: Spec<L>) => ({ name: s.name, help: s.help, labelNames: s.labelNames ?? [], registers: [s.registry] });

/** The text form takes the series' labels as shared labels; the JSON form has them in `labels`. */
function forJson(values: Value[]): Value[] {
  return values.map((v) => ({ value: v.value, labels: { ...v.sharedLabels, ...v.labels }, ...(v.metricName ? { metricName: v.metricName } : {}) }));
}

function metricObject(m: object, type: "gauge" | "counter" | "histogram", values: Value[]) {
  const { name, help } = m as { name: string; help: string };
  return { name, help, type: type as never, aggregator: "sum" as const, collect: () => undefined, values: values as never[] };
}

/** A gauge's or counter's samples as prom-client's metric object (each series' labels shared, see LabelSets). */
function sampledMetric<L extends string>(m: object, type: "gauge" | "counter", samples: Sample<L>[], sets: LabelSets) {
  return metricObject(
    m,
    type,
    samples.map((s) => ({ value: s.value, labels: NO_LABELS, sharedLabels: sets.of(s.labels) })),
  );
}

const jsonForm = (m: ReturnType<typeof metricObject>) => ({ ...m, values: forJson(m.values as Value[]) as never[] });

export class ScrapedGauge<L extends string = string> extends Gauge<L> {
  /** a promise when the value is asked of another process (PostgreSQL's database size) */
  private readonly read: () => Sample<L>[] | Promise<Sample<L>[]>;
  private readonly sets: LabelSets;

  constructor(spec: Spec<L>, read: () => Sample<L>[] | Promise<Sample<L>[]>) {
    super(config(spec));
    this.read = read;
    this.sets = new LabelSets(spec.labelNames ?? [], spec.constLabels);
  }

  async getForPromString() {
    return sampledMetric(this, "gauge", await this.read(), this.sets);
  }

  override async get() {
    return jsonForm(await this.getForPromString());
  }
}

export class ScrapedCounter<L extends string = string> extends Counter<L> {
  private readonly read: () => Sample<L>[];
  private readonly sets: LabelSets;

  constructor(spec: Spec<L>, read: () => Sample<L>[]) {
    super(config(spec));
    this.read = read;
    this.sets = new LabelSets(spec.labelNames ?? [], spec.constLabels);
  }

  getForPromString() {
    return Promise.resolve(sampledMetric(this, "counter", this.read(), this.sets));
  }

  override async get() {
    return jsonForm(await this.getForPromString());
  }
}

export class ScrapedHistogram<L extends string = string> extends Histogram<L> {
  private readonly read: () => HistogramSample<L>[];
  private readonly bounds: readonly number[];
  /** `{le}` of each bucket, +Inf last: the same objects for every series */
  private readonly les: Record<string, string | number>[];
  private readonly sets: LabelSets;

  constructor(spec: Spec<L>, bounds: readonly number[], read: () => HistogramSample<L>[]) {
    super({ ...config(spec), buckets: [...bounds] });
    this.bounds = bounds;
    this.read = read;
    this.les = [...bounds.map((b) => ({ le: b })), { le: "+Inf" }];
    this.sets = new LabelSets(spec.labelNames ?? [], spec.constLabels);
  }

  getForPromString() {
    const { name } = this as unknown as { name: string };
    const bucket = `${name}_bucket`,
      sum = `${name}_sum`,
      count = `${name}_count`;
    const values: Value[] = [];
    for (const { labels, values: h } of this.read()) {
      const shared = this.sets.of(labels);
      let acc = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        acc += h.counts[i];
        values.push({ value: acc, labels: this.les[i], sharedLabels: shared, metricName: bucket });
      }
      values.push({ value: h.count, labels: this.les[this.bounds.length], sharedLabels: shared, metricName: bucket });
      values.push({ value: h.sum, labels: NO_LABELS, sharedLabels: shared, metricName: sum });
      values.push({ value: h.count, labels: NO_LABELS, sharedLabels: shared, metricName: count });
    }
    return Promise.resolve(metricObject(this, "histogram", values));
  }

  override async get() {
    const m = await this.getForPromString();
    return { ...m, values: forJson(m.values as Value[]) as never[] };
  }
}
