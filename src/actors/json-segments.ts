// JSON text carried as segments: a long thread's state JSON is hundreds of KB, and V8 puts every
// string over 128 KiB in its own fresh pages (measured ~1 ms per such string on the 2-core VM,
// against ~20 µs for 100 KiB). The worker therefore never builds the final values as one string:
// it stores them from segments (jsonBytes) and posts the segments to the HTTP thread, which joins
// them only when a reply needs the text (jsonText).

/** Strings whose concatenation is a JSON text. */
export type JsonSegments = string[];

/** Length in UTF-16 units of the text (for memory budgets), without joining it. */
export function jsonLength(segments: JsonSegments): number {
  let n = 0;
  for (const s of segments) n += s.length;
  return n;
}

/**
 * The text. Joined once: the array is replaced in place by the joined text, so every later call
 * (a second waiter, a retained output read again) returns the same string.
 */
export function jsonText(segments: JsonSegments): string {
  if (segments.length !== 1) {
    const text = segments.join("");
    segments.length = 0;
    segments.push(text);
  }
  return segments[0];
}

/** The text UTF-8 encoded into one Buffer (malloc'd, not a V8 heap string). */
export function jsonBytes(segments: JsonSegments): Buffer {
  let size = 0;
  for (const s of segments) size += Buffer.byteLength(s);
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (const s of segments) at += out.write(s, at);
  return out;
}
