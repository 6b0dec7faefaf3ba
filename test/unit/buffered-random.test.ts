// The pooled crypto.getRandomValues installed in actor workers: same contract as Node's, fresh bytes.
import { describe, expect, it } from "vitest";
import { installBufferedRandomValues } from "../../src/util/buffered-random.ts";

// Node's getRandomValues only accepts a real Crypto as `this`, so the tests patch the global one
// (vitest isolates test files, so no other file sees it).
const freshCrypto = (): Crypto => globalThis.crypto;

function errorName(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    return (e as Error).name;
  }
  return "no error";
}

describe("buffered getRandomValues", () => {
  it("fills and returns the same array, with new bytes on every call across pool refills", () => {
    const c = freshCrypto();
    installBufferedRandomValues(c);
    const seen = new Set<string>();
    for (let i = 0; i < 2_000; i++) {
      // 2,000 x 16 bytes crosses the 4 KiB pool several times
      const a = new Uint8Array(16);
      expect(c.getRandomValues(a)).toBe(a);
      seen.add(Buffer.from(a).toString("hex"));
    }
    expect(seen.size).toBe(2_000);
  });

  it("fills only the view it is given, for every integer array type", () => {
    const c = freshCrypto();
    installBufferedRandomValues(c);
    const backing = new Uint8Array(64);
    const view = new Uint8Array(backing.buffer, 8, 32);
    c.getRandomValues(view);
    expect(backing.subarray(0, 8).every((b) => b === 0)).toBe(true);
    expect(backing.subarray(40).every((b) => b === 0)).toBe(true);
    expect(view.some((b) => b !== 0)).toBe(true);
    for (const Kind of [Int8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array, BigInt64Array, BigUint64Array]) {
      const a = new Kind(8);
      expect(c.getRandomValues(a)).toBe(a);
    }
  });

  it("bytes look uniform (chi-square over 256 buckets)", () => {
    const c = freshCrypto();
    installBufferedRandomValues(c);
    const counts = new Array<number>(256).fill(0);
    const a = new Uint8Array(16);
    for (let i = 0; i < 16_384; i++) for (const b of c.getRandomValues(a)) counts[b]!++;
    const expected = (16_384 * 16) / 256;
    const chi2 = counts.reduce((sum, n) => sum + (n - expected) ** 2 / expected, 0);
    expect(chi2).toBeLessThan(400); // 255 degrees of freedom: p < 1e-7 above this
  });

  it("keeps Node's errors for what the spec rejects, and large requests", () => {
    const c = freshCrypto();
    installBufferedRandomValues(c);
    expect(installBufferedRandomValues(c)).toBe(c.getRandomValues);
    expect(errorName(() => c.getRandomValues(new Float32Array(4) as unknown as Uint8Array))).toBe("TypeMismatchError");
    expect(errorName(() => c.getRandomValues(new DataView(new ArrayBuffer(4)) as unknown as Uint8Array))).toBe("TypeMismatchError");
    expect(errorName(() => c.getRandomValues(new Uint8Array(65_537)))).toBe("QuotaExceededError");
    const big = new Uint8Array(4_096);
    expect(c.getRandomValues(big).some((b) => b !== 0)).toBe(true);
  });

  it("installs once", () => {
    const c = freshCrypto();
    const first = installBufferedRandomValues(c);
    expect(installBufferedRandomValues(c)).toBe(first);
  });
});
