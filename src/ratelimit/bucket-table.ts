// Lock-free token buckets in one SharedArrayBuffer, so the main thread and every worker that
// accepts HTTP count against the same buckets: exact limits across threads, bounded memory.
//
// Layout: 64-bit words. Words 0..7 are the header (magic, slots, maxProbe, epochMs, counters, salt);
// then two words per slot: the 64-bit key fingerprint (0 = never used) and the state.
//
// State word: generation (5 bits) * 2^48 + TAT (48 bits, microseconds since epochMs). It stays below
// 2^53, so it converts to a JS number exactly and decoding costs no BigInt arithmetic.
// A bucket is stored in its GCRA form: TAT ("theoretical arrival time") is the instant at which the
// bucket will be full again. With emission interval T = interval/count and capacity C = count*T,
// the bucket holds (now + C - TAT) / T tokens, capped at count. So it is a token bucket with
// continuous refill at count/interval and capacity count, kept in one word: updates are a single
// Atomics.compareExchange, never a lock. TAT <= now means full (so the zero state is a full bucket).
//
// Slots: open addressing with linear probing over at most `maxProbe` slots from hash & (slots-1).
// A slot never goes back to empty, so a lookup stops at the first empty slot. A slot holding
// another key may be reclaimed (evicted) only when that bucket is full: evicting it therefore never
// resets an active key. Eviction is a three-step handover driven by the generation:
//   1. CAS state (gen even, TAT <= now) -> (gen+1 odd: "frozen"), 2. store the new fingerprint,
//   3. CAS state -> (gen+2, TAT 0: a fresh full bucket).
// Nobody waits for a frozen slot: every thread treats it as not its own and probes on (the old
// owner's bucket was full, so it may start a fresh one elsewhere). Consumers load state, then check
// the fingerprint, then CAS with the loaded state: a handover in between changes the generation, so
// the CAS fails and the consumer looks the key up again (the generation would have to wrap, i.e.
// 16 handovers of that slot inside one load-to-CAS window).
// Fingerprints are compared through an Int32Array view of the same memory (no BigInt per probe).
//
// Table full (every slot in the probe window holds a bucket that is not full): consume() answers
// "table-full" and the limiter DENIES the request (fail closed) with Retry-After = time until the
// first bucket in that window is full. Why deny: a flood of fresh identities (key rotation, many
// source IPs) is exactly what a rate limiter must bound; admitting would let it bypass every limit.
// Existing keys are unaffected. Occurrences are counted in the header (`stats().tableFull`).
//
// Known, bounded imprecision: two threads inserting the same brand-new key at the same instant,
// when the probe window has no empty slot, may each evict a different slot (or one may skip the
// other's slot while it is frozen); lookups then always use the first copy in probe order, so that
// key gets at most one extra admission per racing thread, once.
import { randomBytes } from "node:crypto";
import { TroupeError } from "../errors.ts";
import type { KeyHash, Lanes } from "./key-hash.ts";

export interface BucketTableOptions {
  /** Number of slots, a power of two (default 65,536 = 1 MiB of state). */
  slots?: number;
  /** Slots probed per lookup (default 64, at most `slots`). Bounds per-request work; with 64, a new
   *  key first finds no room at ~68 % of slots holding active (not full) buckets. */
  maxProbe?: number;
  /**
   * Time origin of stored TATs in ms since the Unix epoch (default: one day before creation, so a
   * clock stepping back a little stays representable). Earlier instants count as the origin.
   * The table covers ~8.9 years from it (48 bits of µs); a process restart makes a new table.
   */
  epochMs?: number;
}

/** A rule's limit in table units, computed once at registration time. */
export interface BucketSpec {
  readonly count: number;
  readonly intervalSeconds: number;
  /** T: microseconds per token. */
  readonly emissionUs: number;
  /** C = count * T: a bucket admits while TAT - now stays <= C. */
  readonly capacityUs: number;
}

export type TakeOutcome = "admitted" | "denied" | "table-full";

/** Filled in place by consume(), so the hot path allocates nothing for results. */
export interface TakeResult {
  outcome: TakeOutcome;
  /** Whole tokens left after this call (0 when not admitted). */
  remaining: number;
  /** Microseconds until the bucket is completely full again. */
  resetUs: number;
  /** Microseconds until the next token (denied) or until a slot frees up (table-full); 0 when admitted. */
  retryAfterUs: number;
  /** Slot and generation of an admitted take, for refund(). */
  slot: number;
  gen: number;
}

export interface BucketTableStats {
  slots: number;
  maxProbe: number;
  used: number;
  inserts: number;
  evictions: number;
  tableFull: number;
}

const MAGIC = 0x54524c32n; // "TRL2"
const HEADER_WORDS = 8;
const H_MAGIC = 0;
const H_SLOTS = 1;
const H_PROBE = 2;
const H_EPOCH = 3;
const H_INSERTS = 4;
const H_EVICTIONS = 5;
const H_FULL = 6;
const H_SALT = 7;

const GEN_UNIT = 2 ** 48;
const GEN_MASK = 31;
const MAX_TAT_US = GEN_UNIT - 1;
const MAX_RELOCATIONS = 16;
/** Int32 offsets of the low and high halves inside a 64-bit word (platform byte order). */
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
const LO = LITTLE_ENDIAN ? 0 : 1;
const HI = LITTLE_ENDIAN ? 1 : 0;

function fingerprintOf(key: KeyHash): bigint {
  return (BigInt(key.hi) << 32n) | BigInt(key.lo >>> 0);
}

const LOCATE_FULL = -1;
const LOCATE_RETRY = -2;
const RELOCATE = -1;
const DONE = 0;

/** Converts a `count / interval` limit into table units; throws VALIDATION naming the bad value. */
export function bucketSpec(count: number, intervalSeconds: number): BucketSpec {
  if (!Number.isInteger(count) || count < 1) throw new TroupeError("VALIDATION", `rate limit count must be a positive integer, got ${count}`);
  if (!(intervalSeconds > 0) || !Number.isFinite(intervalSeconds)) {
    throw new TroupeError("VALIDATION", `rate limit intervalSeconds must be a positive number, got ${intervalSeconds}`);
  }
  const emissionUs = Math.max(1, Math.round((intervalSeconds * 1e6) / count));
  const capacityUs = emissionUs * count;
  if (capacityUs > 2 ** 40) throw new TroupeError("VALIDATION", `rate limit interval too long: ${intervalSeconds}s`);
  return { count, intervalSeconds, emissionUs, capacityUs };
}

export function newTakeResult(): TakeResult {
  return { outcome: "denied", remaining: 0, resetUs: 0, retryAfterUs: 0, slot: -1, gen: 0 };
}

function resolveOptions(opts: BucketTableOptions): { slots: number; maxProbe: number; epochMs: number } {
  const slots = opts.slots ?? 65_536;
  if (!Number.isInteger(slots) || slots < 2 || (slots & (slots - 1)) !== 0 || slots > 2 ** 26) {
    throw new TroupeError("VALIDATION", `bucket table slots must be a power of two in [2, 2^26], got ${slots}`);
  }
  const maxProbe = Math.min(opts.maxProbe ?? 64, slots);
  if (!Number.isInteger(maxProbe) || maxProbe < 1) throw new TroupeError("VALIDATION", `bucket table maxProbe must be >= 1, got ${maxProbe}`);
  const epochMs = Math.floor(opts.epochMs ?? Date.now() - 86_400_000);
  return { slots, maxProbe, epochMs };
}

/** Allocates a new shared table. Pass `table.buffer` to workers and attach there. */
export function createBucketTable(opts: BucketTableOptions = {}): BucketTable {
  const { slots, maxProbe, epochMs } = resolveOptions(opts);
  const sab = new SharedArrayBuffer((HEADER_WORDS + 2 * slots) * 8);
  const w = new BigInt64Array(sab);
  w[H_SLOTS] = BigInt(slots);
  w[H_PROBE] = BigInt(maxProbe);
  w[H_EPOCH] = BigInt(epochMs);
  w[H_SALT] = BigInt.asIntN(64, BigInt(randomBytes(8).readBigUInt64LE()));
  Atomics.store(w, H_MAGIC, MAGIC);
  return new BucketTable(sab);
}

/**
 * Attaches to a table created by createBucketTable (possibly on another thread). The geometry is
 * read from the buffer; `opts.slots`, if given, must agree with it.
 */
export function attachBucketTable(sab: SharedArrayBuffer, opts: Pick<BucketTableOptions, "slots"> = {}): BucketTable {
  const table = new BucketTable(sab);
  if (opts.slots !== undefined && opts.slots !== table.slots) {
    throw new TroupeError("VALIDATION", `bucket table has ${table.slots} slots, expected ${opts.slots}`);
  }
  return table;
}

export class BucketTable {
  readonly buffer: SharedArrayBuffer;
  readonly slots: number;
  readonly maxProbe: number;
  readonly epochMs: number;
  /** Random per-table lane seeds for identity hashing (same on every attached thread). */
  readonly salt: Readonly<Lanes>;
  private readonly w: BigInt64Array;
  private readonly i32: Int32Array;
  private readonly mask: number;
  /** Set by locate() when it reports LOCATE_FULL: µs until the first bucket in the window is full. */
  private fullWaitUs = 0;

  constructor(sab: SharedArrayBuffer) {
    if (!(sab instanceof SharedArrayBuffer) || sab.byteLength < HEADER_WORDS * 8) {
      throw new TroupeError("VALIDATION", "bucket table needs a SharedArrayBuffer made by createBucketTable");
    }
    const w = new BigInt64Array(sab);
    if (Atomics.load(w, H_MAGIC) !== MAGIC) throw new TroupeError("VALIDATION", "buffer is not a bucket table (bad magic)");
    this.buffer = sab;
    this.w = w;
    this.i32 = new Int32Array(sab);
    const salt = new Int32Array(sab, H_SALT * 8, 2);
    this.salt = Object.freeze({ a: salt[LO], b: salt[HI] });
    this.slots = Number(w[H_SLOTS]);
    this.maxProbe = Number(w[H_PROBE]);
    this.epochMs = Number(w[H_EPOCH]);
    this.mask = this.slots - 1;
    if (w.length !== HEADER_WORDS + 2 * this.slots) throw new TroupeError("VALIDATION", "bucket table buffer size does not match its header");
  }

  /** Converts wall-clock ms to table µs (clamped to the representable range). */
  toUs(nowMs: number): number {
    const us = Math.floor((nowMs - this.epochMs) * 1000);
    return us < 0 ? 0 : us > MAX_TAT_US ? MAX_TAT_US : us;
  }

  /** Takes one token from `key`'s bucket if it has one. Result is written into `out`. */
  consume(key: KeyHash, spec: BucketSpec, nowMs: number, out: TakeResult): TakeResult {
    const nowUs = this.toUs(nowMs);
    for (let attempt = 0; attempt < MAX_RELOCATIONS; attempt++) {
      const slot = this.locate(key, nowUs);
      if (slot === LOCATE_RETRY) continue;
      if (slot === LOCATE_FULL) break;
      if (this.takeAt(slot, key, spec, nowUs, out) === DONE) return out;
    }
    Atomics.add(this.w, H_FULL, 1n);
    out.outcome = "table-full";
    out.remaining = 0;
    out.resetUs = 0;
    out.retryAfterUs = Math.max(this.fullWaitUs, 1);
    out.slot = -1;
    return out;
  }

  /**
   * Gives back a token taken by an admitted consume() (used when a later rule of the same request
   * denies). Exact: it is the inverse of the take unless the slot was handed to another key, which
   * can only happen after the bucket became full again, when there is nothing to give back.
   */
  refund(key: KeyHash, spec: BucketSpec, nowMs: number, taken: Pick<TakeResult, "slot" | "gen">): void {
    if (taken.slot < 0) return;
    const nowUs = this.toUs(nowMs);
    const f = HEADER_WORDS + 2 * taken.slot;
    for (;;) {
      const s = Atomics.load(this.w, f + 1);
      const x = Number(s);
      const gen = Math.floor(x / GEN_UNIT);
      if (gen !== taken.gen || !this.holds(f, key)) return;
      const tat = x - gen * GEN_UNIT;
      if (tat <= nowUs) return; // already full
      const next = Math.max(tat - spec.emissionUs, nowUs);
      if (Atomics.compareExchange(this.w, f + 1, s, BigInt(x - tat + next)) === s) return;
    }
  }

  /** Tokens currently in `key`'s bucket, without taking one (count if the key has no slot). */
  peek(key: KeyHash, spec: BucketSpec, nowMs: number): number {
    const nowUs = this.toUs(nowMs);
    const home = key.lo & this.mask;
    for (let p = 0; p < this.maxProbe; p++) {
      const f = HEADER_WORDS + 2 * ((home + p) & this.mask);
      if (this.isEmpty(f)) break;
      if (!this.holds(f, key)) continue;
      const x = Number(Atomics.load(this.w, f + 1));
      const gen = Math.floor(x / GEN_UNIT);
      if ((gen & 1) === 1) break;
      const tat = x - gen * GEN_UNIT;
      return Math.min(spec.count, Math.floor((nowUs + spec.capacityUs - Math.max(tat, nowUs)) / spec.emissionUs));
    }
    return spec.count;
  }

  stats(): BucketTableStats {
    let used = 0;
    for (let i = 0; i < this.slots; i++) if (!this.isEmpty(HEADER_WORDS + 2 * i)) used++;
    return {
      slots: this.slots,
      maxProbe: this.maxProbe,
      used,
      inserts: Number(Atomics.load(this.w, H_INSERTS)),
      evictions: Number(Atomics.load(this.w, H_EVICTIONS)),
      tableFull: Number(Atomics.load(this.w, H_FULL)),
    };
  }

  /** Whether the fingerprint word at 64-bit index `f` is `key`'s (two int32 loads, no BigInt). */
  private holds(f: number, key: KeyHash): boolean {
    return Atomics.load(this.i32, 2 * f + LO) === key.lo && Atomics.load(this.i32, 2 * f + HI) === key.hi;
  }

  private isEmpty(f: number): boolean {
    return Atomics.load(this.i32, 2 * f + LO) === 0 && Atomics.load(this.i32, 2 * f + HI) === 0;
  }

  /** One GCRA step on a located slot; RELOCATE when the slot turned out not to be (or no longer be) ours. */
  private takeAt(slot: number, key: KeyHash, spec: BucketSpec, nowUs: number, out: TakeResult): number {
    const w = this.w;
    const f = HEADER_WORDS + 2 * slot;
    for (;;) {
      const s = Atomics.load(w, f + 1);
      const x = Number(s);
      const gen = Math.floor(x / GEN_UNIT);
      if ((gen & 1) === 1 || !this.holds(f, key)) return RELOCATE; // frozen, or no longer ours
      const tat = x - gen * GEN_UNIT;
      const next = (tat > nowUs ? tat : nowUs) + spec.emissionUs;
      if (next - nowUs > spec.capacityUs) {
        out.outcome = "denied";
        out.remaining = 0;
        out.resetUs = tat - nowUs;
        out.retryAfterUs = next - spec.capacityUs - nowUs;
        out.slot = -1;
        return DONE;
      }
      if (next > MAX_TAT_US) return RELOCATE; // clock past the table's range (see epochMs)
      if (Atomics.compareExchange(w, f + 1, s, BigInt(x - tat + next)) === s) {
        out.outcome = "admitted";
        out.remaining = Math.floor((nowUs + spec.capacityUs - next) / spec.emissionUs);
        out.resetUs = next - nowUs;
        out.retryAfterUs = 0;
        out.slot = slot;
        out.gen = gen;
        return DONE;
      }
    }
  }

  /** Finds or claims the slot of `key`: slot index, LOCATE_FULL, or LOCATE_RETRY (lost a race). */
  private locate(key: KeyHash, nowUs: number): number {
    const w = this.w;
    const home = key.lo & this.mask;
    let victim = -1;
    let victimState = 0n;
    let victimTat = Infinity;
    let minWait = Infinity;
    const fp = fingerprintOf(key);
    for (let p = 0; p < this.maxProbe; p++) {
      const slot = (home + p) & this.mask;
      const f = HEADER_WORDS + 2 * slot;
      // One 64-bit load: two int32 loads can straddle another thread's claim of this slot and see
      // it neither empty nor ours, and the key would then be claimed a second slot further on
      // (two buckets for one key: over-admission, seen as 4001 of 4000 under contention).
      const word = Atomics.load(w, f);
      if (word === fp) {
        // Ours unless a handover froze it (then our bucket was full: probe on, start afresh).
        if (Math.floor(Number(Atomics.load(w, f + 1)) / GEN_UNIT) % 2 === 0) return slot;
        continue;
      }
      if (word === 0n) {
        const cur = Atomics.compareExchange(w, f, 0n, fp);
        if (cur === 0n) {
          Atomics.add(w, H_INSERTS, 1n);
          return slot;
        }
        if (cur === fp) return slot;
      }
      const s = Atomics.load(w, f + 1);
      const x = Number(s);
      const gen = Math.floor(x / GEN_UNIT);
      if ((gen & 1) === 1) continue; // mid-handover: neither ours nor reclaimable
      const tat = x - gen * GEN_UNIT;
      if (tat <= nowUs) {
        if (tat < victimTat) {
          victim = slot;
          victimState = s;
          victimTat = tat;
        }
      } else if (tat - nowUs < minWait) {
        minWait = tat - nowUs;
      }
    }
    if (victim < 0) {
      this.fullWaitUs = minWait === Infinity ? 1_000_000 : minWait;
      return LOCATE_FULL;
    }
    // Handover of a full bucket to `key` (see file header).
    const f = HEADER_WORDS + 2 * victim;
    const x = Number(victimState);
    const frozen = BigInt(x + GEN_UNIT);
    if (Atomics.compareExchange(w, f + 1, victimState, frozen) !== victimState) return LOCATE_RETRY;
    Atomics.store(w, f, fingerprintOf(key));
    const gen = Math.floor(x / GEN_UNIT);
    Atomics.compareExchange(w, f + 1, frozen, BigInt(((gen + 2) & GEN_MASK) * GEN_UNIT));
    Atomics.add(w, H_EVICTIONS, 1n);
    return victim;
  }
}
