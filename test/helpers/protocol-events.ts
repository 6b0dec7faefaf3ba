// POST /threads/{t}/stream/events (the thread protocol's SSE subscription) read frame by frame:
// shared by the single-server and the cluster protocol tests.
import { expect } from "vitest";

export interface SseFrame {
  id: string;
  event: string;
  data: any;
}

/** Collects the subscription's frames until `until` holds (then the request is aborted); `onOpen` once it answered 200. */
export async function readProtocolEvents(
  baseUrl: string,
  threadId: string,
  body: unknown,
  until: (fs: SseFrame[]) => boolean,
  opts: { timeoutMs?: number; onOpen?: () => void } = {},
): Promise<SseFrame[]> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), opts.timeoutMs ?? 8_000);
  const frames: SseFrame[] = [];
  try {
    const res = await fetch(`${baseUrl}/threads/${threadId}/stream/events`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: ac.signal,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    opts.onOpen?.();
    const decoder = new TextDecoder();
    let buf = "";
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buf += decoder.decode(chunk, { stream: true });
      let i: number;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const f: Partial<SseFrame> = {};
        for (const line of block.split("\n")) {
          if (line.startsWith("id: ")) f.id = line.slice(4);
          else if (line.startsWith("event: ")) f.event = line.slice(7);
          else if (line.startsWith("data: ")) f.data = JSON.parse(line.slice(6));
        }
        if (f.event) frames.push(f as SseFrame);
      }
      if (until(frames)) break;
    }
  } catch (err) {
    if (!ac.signal.aborted) throw err;
    throw new Error(`timed out; got ${JSON.stringify(frames.map((f) => f.event))}`);
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
  return frames;
}
