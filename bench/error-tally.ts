// Per-scenario error accounting: counts by kind (`HTTP 422`, `ECONNRESET`, `run error`, …)
// plus a few sample messages, so a failing server is reported instead of crashing the run.
import { TransportError } from "./http/types.ts";

const MAX_SAMPLES = 5;
const MAX_SAMPLE_CHARS = 300;

export interface ErrorReport {
  count: number;
  byKind: Record<string, number>;
  samples: string[];
}

export class ErrorTally {
  count = 0;
  private readonly byKind = new Map<string, number>();
  private readonly samples: string[] = [];

  add(kind: string, detail?: string): void {
    this.count++;
    this.byKind.set(kind, (this.byKind.get(kind) ?? 0) + 1);
    if (this.samples.length < MAX_SAMPLES) {
      const text = detail === undefined || detail === "" ? kind : `${kind}: ${detail}`;
      this.addSample(text.length > MAX_SAMPLE_CHARS ? `${text.slice(0, MAX_SAMPLE_CHARS)}…` : text);
    }
  }

  /** Records a thrown value (transport failure or a bug in the scenario itself). */
  addThrown(err: unknown): void {
    if (err instanceof TransportError) this.add(err.code, err.message);
    else if (err instanceof BenchCheckError) this.add(err.kind, err.detail);
    else this.add("exception", err instanceof Error ? err.message : String(err));
  }

  merge(report: ErrorReport): void {
    this.count += report.count;
    for (const [k, v] of Object.entries(report.byKind)) this.byKind.set(k, (this.byKind.get(k) ?? 0) + v);
    for (const s of report.samples) this.addSample(s);
  }

  /** Keeps up to MAX_SAMPLES distinct messages. */
  private addSample(text: string): void {
    if (this.samples.length < MAX_SAMPLES && !this.samples.includes(text)) this.samples.push(text);
  }

  report(): ErrorReport {
    return { count: this.count, byKind: Object.fromEntries(this.byKind), samples: [...this.samples] };
  }
}

/** A response that arrived but is wrong (non-2xx, `__error__` body, missing id); thrown by api.ts checks. */
export class BenchCheckError extends Error {
  constructor(
    readonly kind: string,
    readonly detail: string,
  ) {
    super(`${kind}: ${detail}`);
    this.name = "BenchCheckError";
  }
}
