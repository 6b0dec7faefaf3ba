// Latency summaries: nearest-rank percentiles over a sorted copy of the samples.

export interface LatencySummary {
  count: number;
  meanMs: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
}

/** Nearest-rank percentile of an ascending array (`q` in 0..100); NaN when empty. */
export function percentile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((q / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

export function summarize(samples: ArrayLike<number>): LatencySummary {
  const sorted = Float64Array.from(samples).sort();
  let sum = 0;
  for (let i = 0; i < sorted.length; i++) sum += sorted[i];
  return {
    count: sorted.length,
    meanMs: sorted.length === 0 ? Number.NaN : sum / sorted.length,
    p50Ms: percentile(sorted, 50),
    p90Ms: percentile(sorted, 90),
    p99Ms: percentile(sorted, 99),
    maxMs: sorted.length === 0 ? Number.NaN : sorted[sorted.length - 1],
  };
}

/** Growable float buffer: latency recording without boxing numbers into a JS array. */
export class SampleBuffer {
  private data = new Float64Array(1024);
  private n = 0;

  push(v: number): void {
    if (this.n === this.data.length) {
      const next = new Float64Array(this.data.length * 2);
      next.set(this.data);
      this.data = next;
    }
    this.data[this.n++] = v;
  }

  get length(): number {
    return this.n;
  }

  toArray(): Float64Array {
    return this.data.slice(0, this.n);
  }
}
