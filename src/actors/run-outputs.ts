// Worker side of run outputs (the /wait and /join body: a run's final values, its interrupt or its
// error). On a long thread the output is the whole history, hundreds of KB: posting it to the HTTP
// thread copied it twice (CPU of the busy worker on every run) and the HTTP thread then held it for
// late joins, where those ArrayBuffers drove its full GCs (bench/RESULTS.md, session 14). Most background
// runs are never joined, so a large output nobody waits for stays here as JSON segments, which
// share the sealed message-list segments the wire cache holds anyway (json-segments.ts,
// message-list-json.ts), and is encoded only when a join asks for it (run.output). Small outputs
// and awaited ones (/wait, MCP tool calls) still go with run.done: a copy costs less there than a
// later round trip.
import { jsonBytes, type JsonSegments } from "../bridge/json-segments.ts";

/** An output as the actor has it: JSON segments, and their UTF-8 bytes when it encoded them already. */
export interface RunOutput {
  json: JsonSegments;
  bytes?: Uint8Array;
}

export interface OutputRetention {
  /** outputs under this size (bytes) are posted with run.done whoever waits */
  postBelowBytes: number;
  /** kept outputs together, counted at their full JSON length; past it the oldest go first */
  maxBytes: number;
  /** how long a kept output waits for a join (the HTTP thread forgets finished runs as late) */
  maxAgeMs: number;
}

export const OUTPUT_RETENTION: OutputRetention = { postBelowBytes: 64 * 1024, maxBytes: 32 * 1024 * 1024, maxAgeMs: 60_000 };

/** UTF-16 length of the JSON: its UTF-8 size for ASCII text, which a state's JSON mostly is. */
function jsonLength(json: JsonSegments): number {
  let n = 0;
  for (const s of json) n += s.length;
  return n;
}

interface KeptOutput {
  json: JsonSegments;
  length: number;
  keptAt: number;
}

export class RunOutputs {
  /** outputs awaited by a request on the HTTP thread: posted with run.done whatever their size */
  private readonly awaited = new Set<string>();
  /** finished runs' outputs not posted, oldest first */
  private readonly kept = new Map<string, KeptOutput>();
  private keptLength = 0;
  private sweep?: NodeJS.Timeout;
  private readonly opts: OutputRetention;

  constructor(
    opts: Partial<OutputRetention> = {},
    private readonly now: () => number = () => performance.now(),
  ) {
    this.opts = { ...OUTPUT_RETENTION, ...opts };
  }

  /** A request waits for this run's output (set at its create). */
  await(runId: string): void {
    this.awaited.add(runId);
  }

  /** The run will not end here after all (its create was refused). */
  refused(runId: string): void {
    this.awaited.delete(runId);
  }

  /**
   * The run ended: the bytes to post with its run.done, or undefined when the output stays here
   * until run.output asks for it.
   */
  ended(runId: string, output: RunOutput): Uint8Array | undefined {
    const awaited = this.awaited.delete(runId);
    const length = output.bytes?.byteLength ?? jsonLength(output.json);
    if (awaited || length < this.opts.postBelowBytes) return output.bytes ?? jsonBytes(output.json);
    this.keep(runId, output.json, length);
    return undefined;
  }

  /** A kept output as UTF-8 JSON; undefined when it was never kept here or has expired. */
  bytesOf(runId: string): Uint8Array | undefined {
    this.expire();
    const kept = this.kept.get(runId);
    return kept === undefined ? undefined : jsonBytes(kept.json);
  }

  get size(): number {
    return this.kept.size;
  }

  /** kept outputs' JSON length together */
  get length(): number {
    return this.keptLength;
  }

  private keep(runId: string, json: JsonSegments, length: number): void {
    this.drop(runId);
    this.kept.set(runId, { json, length, keptAt: this.now() });
    this.keptLength += length;
    for (const [oldest] of this.kept) {
      if (this.keptLength <= this.opts.maxBytes || oldest === runId) break;
      this.drop(oldest);
    }
    this.expire();
    // one timer for all of them, so kept outputs do not outlive their age on a quiet server
    this.sweep ??= setInterval(
      () => {
        this.expire();
        if (this.kept.size === 0) {
          clearInterval(this.sweep);
          this.sweep = undefined;
        }
      },
      Math.max(1_000, this.opts.maxAgeMs / 4),
    ).unref();
  }

  private expire(): void {
    const oldestKept = this.now() - this.opts.maxAgeMs;
    for (const [runId, kept] of this.kept) {
      if (kept.keptAt > oldestKept) break;
      this.drop(runId);
    }
  }

  private drop(runId: string): void {
    const kept = this.kept.get(runId);
    if (kept === undefined) return;
    this.kept.delete(runId);
    this.keptLength -= kept.length;
  }
}
