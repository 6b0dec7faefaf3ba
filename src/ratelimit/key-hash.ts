// Hashes (rule, identity) pairs to a slot hash plus a 64-bit fingerprint (two int32 halves)
// without building strings or BigInts, so the per-request path stays allocation-light.

/** Where a key lives in the bucket table: `lo` picks the home slot; (hi, lo) is the fingerprint, never (0, 0). */
export interface KeyHash {
  hi: number;
  lo: number;
}

/** Two independent 32-bit lanes over a string (one identity, or a rule id). */
export interface Lanes {
  a: number;
  b: number;
}

/** Lane start values; a table may supply its own random salt so fingerprints cannot be aimed. */
export const UNSALTED: Readonly<Lanes> = Object.freeze({ a: 0x811c9dc5 | 0, b: 0x9747b28c | 0 });

function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h;
}

/**
 * Hashes one or two strings into `out` (a NUL separates the parts, which header values cannot
 * contain, so ("ab","c") and ("a","bc") differ). One pass feeds two FNV-style lanes with different
 * primes; combineKey() finishes them. Reuse `out` to stay allocation-free.
 */
export function hashLanes(first: string, second: string | undefined, out: Lanes, salt: Readonly<Lanes> = UNSALTED): Lanes {
  let a = salt.a;
  let b = salt.b;
  for (let i = 0; i < first.length; i++) {
    const c = first.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
  }
  if (second !== undefined) {
    a = Math.imul(a, 0x01000193);
    b = Math.imul(b, 0x5bd1e995);
    for (let i = 0; i < second.length; i++) {
      const c = second.charCodeAt(i);
      a = Math.imul(a ^ c, 0x01000193);
      b = Math.imul(b ^ c, 0x5bd1e995);
    }
  }
  out.a = a;
  out.b = b;
  return out;
}

/** Combines a rule's seed lanes with an identity's lanes into a table key, written into `out`. */
export function combineKey(seed: Readonly<Lanes>, identity: Readonly<Lanes>, out: KeyHash): KeyHash {
  const lo = fmix32(seed.a ^ identity.a);
  const hi = fmix32(seed.b ^ identity.b ^ Math.imul(lo, 0x27d4eb2d));
  out.lo = lo;
  out.hi = hi === 0 && lo === 0 ? 1 : hi; // (0, 0) marks an empty slot
  return out;
}

/** Key of (scope, identity parts), unsalted: for tests and tools that need the same key on every thread. */
export function keyOf(scope: string, identity: string, identitySecond?: string): KeyHash {
  const seed = hashLanes(scope, undefined, { a: 0, b: 0 });
  return combineKey(seed, hashLanes(identity, identitySecond, { a: 0, b: 0 }), { hi: 0, lo: 0 });
}
