// Just enough SSE framing for the benchmark: split a stream into event blocks, skip comment-only
// blocks, read an event's name.

/** Complete event blocks in `text` (CRLF normalised), comment-only blocks dropped; the tail is an unfinished block. */
export function completeEvents(text: string): { events: string[]; rest: string } {
  const normalised = text.replace(/\r\n?/g, "\n");
  const parts = normalised.split("\n\n");
  const rest = parts.pop() ?? "";
  const events = parts.filter((block) => block.split("\n").some((line) => line !== "" && !line.startsWith(":")));
  return { events, rest };
}

/** Value of the `event:` field, "message" when absent (SSE default). */
export function eventName(block: string): string {
  for (const line of block.split("\n")) {
    if (line.startsWith("event:")) return line.slice(6).trim();
  }
  return "message";
}
