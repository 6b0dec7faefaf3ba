// prom-client metrics whose values are read when /metrics is scraped, from numbers kept elsewhere
// (hot-path cells, the shards' shared board, counters of other threads): prom-client still does
// the exposition (names, escaping, default labels, the text and JSON formats), and recording a
// value costs no label hashing.
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
}

const config = <L extends string>(s: Spec<L>) => ({ name: s.name, help: s.help, labelNames: s.labelNames ?? [], registers: [s.registry] });

export class ScrapedGauge<L extends string = string> extends Gauge<L> {
  private readonly read: () => Sample<L>[];

  constructor(spec: Spec<L>, read: () => Sample<L>[]) {
    super(config(spec));
    this.read = read;
  }

  override async get() {
    return { name: spec(this).name, help: spec(this).help, type: "gauge" as never, aggregator: "sum" as const, collect: () => undefined, values: this.read() };
  }

  getForPromString() {
    return this.get();
  }
}

export class ScrapedCounter<L extends string = string> extends Counter<L> {
  private readonly read: () => Sample<L>[];

  constructor(spec: Spec<L>, read: () => Sample<L>[]) {
    super(config(spec));
    this.read = read;
  }

  override async get() {
    return { name: spec(this).name, help: spec(this).help, type: "counter" as never, aggregator: "sum" as const, collect: () => undefined, values: this.read() };
  }

  getForPromString() {
    return this.get();
  }
}

export class ScrapedHistogram<L extends string = string> extends Histogram<L> {
  private readonly read: () => HistogramSample<L>[];
  private readonly bounds: readonly number[];

  constructor(spec: Spec<L>, bounds: readonly number[], read: () => HistogramSample<L>[]) {
    super({ ...config(spec), buckets: [...bounds] });
    this.bounds = bounds;
    this.read = read;
  }

  override async get() {
    const name = spec(this).name;
    const values: { labels: Record<string, string | number | undefined>; value: number; metricName: string }[] = [];
    for (const { labels, values: h } of this.read()) {
      let acc = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        acc += h.counts[i];
        values.push({ labels: { ...labels, le: this.bounds[i] }, value: acc, metricName: `${name}_bucket` });
      }
      values.push({ labels: { ...labels, le: "+Inf" }, value: h.count, metricName: `${name}_bucket` });
      values.push({ labels, value: h.sum, metricName: `${name}_sum` });
      values.push({ labels, value: h.count, metricName: `${name}_count` });
    }
    return { name, help: spec(this).help, type: "histogram" as never, aggregator: "sum" as const, collect: () => undefined, values: values as never[] };
  }

  getForPromString() {
    return this.get();
  }
}

/** name and help, which prom-client's Metric constructor copies onto the instance */
function spec(m: object): { name: string; help: string } {
  return m as { name: string; help: string };
}
