// JSON text carried as segments, then as bytes: a long thread's state JSON is hundreds of KB, and
// V8 puts every string over 128 KiB in fresh pages of its own, and copying one costs far more than
// copying a string just under that size. The worker therefore never builds a run's final
// values as one string: it encodes the segments once into UTF-8 bytes (outside the V8 heap),
// writes those to LMDB and posts them to the HTTP thread, which sends them as they are (/wait)
// or decodes them when it needs the text (join, MCP). Bytes rather than the segments themselves:
// the HTTP thread keeps finished runs' outputs for a while, and strings kept there were copied by
// every young-generation GC (the scavenge times are in bench/RESULTS.md).

/** Strings whose concatenation is a JSON text. */
export type JsonSegments = string[];

/**
 * The text UTF-8 encoded into a Uint8Array that owns its whole ArrayBuffer: postMessage copies a
 * view's entire buffer, and a slice of Node's shared Buffer pool would drag 8 KiB along.
 */
export function jsonBytes(segments: JsonSegments): Uint8Array {
  let size = 0;
  for (const s of segments) size += Buffer.byteLength(s);
  const out = Buffer.allocUnsafeSlow(size);
  let at = 0;
  for (const s of segments) at += out.write(s, at);
  return out;
}

const decoder = new TextDecoder();

/** The JSON text of bytes made by jsonBytes. */
export function jsonText(bytes: Uint8Array): string {
  return decoder.decode(bytes);
}
