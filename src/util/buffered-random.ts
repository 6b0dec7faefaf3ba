// crypto.getRandomValues() served from a pool of CSPRNG bytes, for worker threads that run graphs.
// Node runs one synchronous crypto job per getRandomValues call, ~4 µs whatever the size, and
// LangChain/LangSmith draw 16 bytes for a uuid on every runnable call (RunTree ids, even with tracing
// off): on the echo graph that was ~15% of a run. Node's own randomUUID() buffers entropy the same
// way; the bytes still come from randomFillSync (OpenSSL's CSPRNG) and each is handed out once.
import { randomFillSync } from "node:crypto";

/** Pool refilled with one randomFillSync call when it runs dry. */
const POOL_BYTES = 4096;
/** Larger requests go straight to Node's implementation (one job each is cheap relative to their size). */
const MAX_POOLED_BYTES = 256;

type IntegerArray = Int8Array | Uint8Array | Uint8ClampedArray | Int16Array | Uint16Array | Int32Array | Uint32Array | BigInt64Array | BigUint64Array;

// Only integer typed arrays are valid input; anything else goes to Node so it throws the spec's error.
const INTEGER_ARRAYS = [Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array, BigInt64Array, BigUint64Array];

function isIntegerArray(value: unknown): value is IntegerArray {
  for (const kind of INTEGER_ARRAYS) if (value instanceof kind) return true;
  return false;
}

const INSTALLED = Symbol.for("troupe.bufferedRandomValues");

/**
 * Replaces `target.getRandomValues` (an own property on the instance; the prototype is untouched) with
 * the pooled version. Idempotent. Returns the function now installed.
 */
export function installBufferedRandomValues(target: Crypto = globalThis.crypto): Crypto["getRandomValues"] {
  const marked = target as Crypto & { [INSTALLED]?: true };
  if (marked[INSTALLED]) return target.getRandomValues;
  const native = target.getRandomValues.bind(target);
  const pool = new Uint8Array(POOL_BYTES);
  let used = POOL_BYTES;
  const getRandomValues = <T extends ArrayBufferView | null>(array: T): T => {
    if (!isIntegerArray(array) || array.byteLength > MAX_POOLED_BYTES) return native(array as ArrayBufferView) as T;
    const n = array.byteLength;
    if (used + n > POOL_BYTES) {
      randomFillSync(pool);
      used = 0;
    }
    new Uint8Array(array.buffer, array.byteOffset, n).set(pool.subarray(used, used + n));
    used += n;
    return array;
  };
  Object.defineProperty(target, "getRandomValues", { value: getRandomValues, writable: true, configurable: true, enumerable: true });
  Object.defineProperty(target, INSTALLED, { value: true });
  return target.getRandomValues;
}
