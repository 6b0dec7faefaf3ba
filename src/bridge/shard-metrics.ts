// Run metrics of the actor workers, in one SharedArrayBuffer: each shard writes its own region
// with Atomics (run counters and histograms as runs start and end; queue gauges and heap once a
// second) and the HTTP thread reads every region when /metrics is scraped, so no value costs a
// message and nothing on either side waits for the other.

/** Final statuses a run ends with. */
export const RUN_END_STATUSES = ["success", "error", "timeout", "interrupted"] as const;
export type RunEndStatus = (typeof RUN_END_STATUSES)[number];

/** Upper bounds (seconds) of the run duration histogram; +Inf follows. */
export const RUN_DURATION_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800] as const;
/** Upper bounds (seconds) of the queue-wait histogram (run created, or due, → started); +Inf follows. */
export const QUEUE_WAIT_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300] as const;

/**
 * Pending runs' ages at the snapshot, in quarter-octave buckets of milliseconds (bucket i holds
 * ages below 2^(i/4) ms): the median wait over every shard is read from their sum to within ~10%.
 */
const AGE_BUCKETS = 128;

// gauge slots of a region
const PENDING = 0,
  RUNNING = 1,
  OLDEST_DUE = 2,
  OLDEST_UNBLOCKED_DUE = 3,
  SNAPSHOT_AT = 4,
  HEAP_USED = 5,
  HEAP_TOTAL = 6;
const GAUGES = 7;
const AGES = GAUGES;
const PER_GRAPH_START = AGES + AGE_BUCKETS;
// per graph: started, wait histogram (+Inf), wait sum (µs); then per status: finished, duration histogram (+Inf), duration sum (µs)
const WAIT_SLOTS = QUEUE_WAIT_BUCKETS.length + 1;
const DURATION_SLOTS = RUN_DURATION_BUCKETS.length + 1;
const STATUS_STRIDE = 1 + DURATION_SLOTS + 1;
const GRAPH_STRIDE = 1 + WAIT_SLOTS + 1 + RUN_END_STATUSES.length * STATUS_STRIDE;

/** The label of runs whose graph is not one the server was started with. */
export const OTHER_GRAPH = "other";

function regionSize(graphs: number): number {
  return PER_GRAPH_START + (graphs + 1) * GRAPH_STRIDE;
}

export function createShardMetricsBuffer(shards: number, graphIds: readonly string[]): SharedArrayBuffer {
  return new SharedArrayBuffer(shards * regionSize(graphIds.length) * BigInt64Array.BYTES_PER_ELEMENT);
}

/** What a shard's snapshot says about its queue. */
export interface QueueSnapshot {
  pending: number;
  running: number;
  /** epoch ms each pending run became (or becomes) due, in any order */
  pendingDue: number[];
  /** the earliest due time of a pending run nothing holds back (no run in flight on its thread); NaN: none */
  oldestUnblockedDue: number;
}

function bucketOf(bounds: readonly number[], v: number): number {
  let i = 0;
  while (i < bounds.length && v > bounds[i]) i++;
  return i;
}

function ageBucket(ageMs: number): number {
  if (ageMs < 1) return 0;
  return Math.min(AGE_BUCKETS - 1, Math.floor(Math.log2(ageMs) * 4) + 1);
}

/** Upper bound (ms) of an age bucket. */
function ageBound(i: number): number {
  return 2 ** (i / 4);
}

class Region {
  readonly slots: BigInt64Array;
  protected readonly graphIndex: ReadonlyMap<string, number>;

  constructor(
    buffer: SharedArrayBuffer,
    shard: number,
    readonly graphIds: readonly string[],
  ) {
    const size = regionSize(graphIds.length);
    this.slots = new BigInt64Array(buffer, shard * size * 8, size);
    this.graphIndex = new Map(graphIds.map((g, i) => [g, i]));
  }

  protected graphBase(graphId: string): number {
    return PER_GRAPH_START + (this.graphIndex.get(graphId) ?? this.graphIds.length) * GRAPH_STRIDE;
  }
}

/** The worker's side: one shard's region. */
export class ShardMetricsWriter extends Region {
  /** a run of `graphId` started after waiting `waitMs` in its thread's queue */
  runStarted(graphId: string, waitMs: number): void {
    const g = this.graphBase(graphId);
    Atomics.add(this.slots, g, 1n);
    const seconds = Math.max(0, waitMs) / 1000;
    Atomics.add(this.slots, g + 1 + bucketOf(QUEUE_WAIT_BUCKETS, seconds), 1n);
    Atomics.add(this.slots, g + 1 + WAIT_SLOTS, BigInt(Math.round(seconds * 1e6)));
  }

  /** a run ended; `durationMs` undefined for a run that never started (cancelled while pending) */
  runEnded(graphId: string, status: RunEndStatus, durationMs: number | undefined): void {
    const s = this.graphBase(graphId) + 1 + WAIT_SLOTS + 1 + RUN_END_STATUSES.indexOf(status) * STATUS_STRIDE;
    Atomics.add(this.slots, s, 1n);
    if (durationMs === undefined) return;
    const seconds = Math.max(0, durationMs) / 1000;
    Atomics.add(this.slots, s + 1 + bucketOf(RUN_DURATION_BUCKETS, seconds), 1n);
    Atomics.add(this.slots, s + 1 + DURATION_SLOTS, BigInt(Math.round(seconds * 1e6)));
  }

  publishQueue(q: QueueSnapshot, nowMs: number): void {
    const ages = new Array<number>(AGE_BUCKETS).fill(0);
    let oldest = Number.POSITIVE_INFINITY;
    for (const due of q.pendingDue) {
      if (due < oldest) oldest = due;
      if (due <= nowMs) ages[ageBucket(nowMs - due)]++; // a run not yet due (after_seconds) has not waited
    }
    for (let i = 0; i < AGE_BUCKETS; i++) Atomics.store(this.slots, AGES + i, BigInt(ages[i]));
    Atomics.store(this.slots, PENDING, BigInt(q.pending));
    Atomics.store(this.slots, RUNNING, BigInt(q.running));
    Atomics.store(this.slots, OLDEST_DUE, Number.isFinite(oldest) ? BigInt(Math.round(oldest)) : 0n);
    Atomics.store(this.slots, OLDEST_UNBLOCKED_DUE, Number.isFinite(q.oldestUnblockedDue) ? BigInt(Math.round(q.oldestUnblockedDue)) : 0n);
    Atomics.store(this.slots, SNAPSHOT_AT, BigInt(Math.round(nowMs)));
  }

  publishHeap(used: number, total: number): void {
    Atomics.store(this.slots, HEAP_USED, BigInt(used));
    Atomics.store(this.slots, HEAP_TOTAL, BigInt(total));
  }

  /** A shard that stopped: its gauges say nothing any more (its counters stay). */
  clearGauges(): void {
    for (let i = 0; i < PER_GRAPH_START; i++) Atomics.store(this.slots, i, 0n);
  }
}

export interface HistogramValues {
  /** per bucket (not cumulative), the +Inf bucket last */
  counts: number[];
  sum: number;
  count: number;
}

export interface ShardQueueGauges {
  pending: number;
  running: number;
  /** seconds the oldest pending run has waited (0: none pending) */
  oldestWaitSeconds: number;
  oldestUnblockedWaitSeconds: number;
  heapUsed: number;
  heapTotal: number;
}

/** The HTTP thread's side: reads every shard's region. */
export class ShardMetricsReader {
  private readonly regions: Region[];

  constructor(
    buffer: SharedArrayBuffer,
    shards: number,
    readonly graphIds: readonly string[],
  ) {
    this.regions = Array.from({ length: shards }, (_, i) => new Region(buffer, i, graphIds));
  }

  private slots(shard: number): BigInt64Array {
    return this.regions[shard].slots;
  }

  get shards(): number {
    return this.regions.length;
  }

  queue(shard: number, nowMs: number): ShardQueueGauges {
    const s = this.slots(shard);
    const at = Number(Atomics.load(s, SNAPSHOT_AT));
    const wait = (slot: number) => {
      const due = Number(Atomics.load(s, slot));
      return due === 0 || at === 0 ? 0 : Math.max(0, nowMs - due) / 1000;
    };
    return {
      pending: Number(Atomics.load(s, PENDING)),
      running: Number(Atomics.load(s, RUNNING)),
      oldestWaitSeconds: wait(OLDEST_DUE),
      oldestUnblockedWaitSeconds: wait(OLDEST_UNBLOCKED_DUE),
      heapUsed: Number(Atomics.load(s, HEAP_USED)),
      heapTotal: Number(Atomics.load(s, HEAP_TOTAL)),
    };
  }

  /** Median wait (seconds) of every shard's pending runs that are due, from their age buckets; 0 when none. */
  medianPendingWaitSeconds(nowMs: number): number {
    const ages = new Array<number>(AGE_BUCKETS).fill(0);
    let total = 0;
    let latestSnapshot = 0;
    for (let r = 0; r < this.regions.length; r++) {
      const s = this.slots(r);
      latestSnapshot = Math.max(latestSnapshot, Number(Atomics.load(s, SNAPSHOT_AT)));
      for (let i = 0; i < AGE_BUCKETS; i++) {
        const n = Number(Atomics.load(s, AGES + i));
        ages[i] += n;
        total += n;
      }
    }
    if (total === 0) return 0;
    let seen = 0;
    for (let i = 0; i < AGE_BUCKETS; i++) {
      seen += ages[i];
      if (seen * 2 >= total) {
        const lower = i === 0 ? 0 : ageBound(i - 1);
        const mid = (lower + ageBound(i)) / 2; // the bucket's middle: within ~10% of the true age
        return (mid + Math.max(0, nowMs - latestSnapshot)) / 1000;
      }
    }
    return 0;
  }

  /** Runs started per graph, summed over the shards. */
  started(graphIndex: number): number {
    let n = 0;
    for (let r = 0; r < this.regions.length; r++) n += Number(Atomics.load(this.slots(r), PER_GRAPH_START + graphIndex * GRAPH_STRIDE));
    return n;
  }

  queueWait(graphIndex: number): HistogramValues {
    return this.histogram(PER_GRAPH_START + graphIndex * GRAPH_STRIDE + 1, WAIT_SLOTS);
  }

  finished(graphIndex: number, status: RunEndStatus): number {
    let n = 0;
    const at = this.statusBase(graphIndex, status);
    for (let r = 0; r < this.regions.length; r++) n += Number(Atomics.load(this.slots(r), at));
    return n;
  }

  duration(graphIndex: number, status: RunEndStatus): HistogramValues {
    return this.histogram(this.statusBase(graphIndex, status) + 1, DURATION_SLOTS);
  }

  /** graph ids in index order, `other` last */
  get graphLabels(): string[] {
    return [...this.graphIds, OTHER_GRAPH];
  }

  private statusBase(graphIndex: number, status: RunEndStatus): number {
    return PER_GRAPH_START + graphIndex * GRAPH_STRIDE + 1 + WAIT_SLOTS + 1 + RUN_END_STATUSES.indexOf(status) * STATUS_STRIDE;
  }

  /** `n` bucket slots at `at`, then the sum (µs) */
  private histogram(at: number, n: number): HistogramValues {
    const counts = new Array<number>(n).fill(0);
    let sumUs = 0;
    for (let r = 0; r < this.regions.length; r++) {
      const s = this.slots(r);
      for (let i = 0; i < n; i++) counts[i] += Number(Atomics.load(s, at + i));
      sumUs += Number(Atomics.load(s, at + n));
    }
    return { counts, sum: sumUs / 1e6, count: counts.reduce((a, b) => a + b, 0) };
  }
}
