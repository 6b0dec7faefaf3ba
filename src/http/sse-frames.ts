// SSE framing shared by the streaming routes (run streams, thread streams, the thread protocol).
import type { RunEvent } from "../bridge/messages.ts";

/** The numeric Last-Event-ID a reconnecting SSE client sent, if any (-1 = from the start). */
export function lastEventId(headers: Record<string, string | undefined>): number | undefined {
  const raw = headers["last-event-id"]?.trim();
  return raw !== undefined && /^-?\d+$/.test(raw) ? Number(raw) : undefined;
}

export function sseFrame(e: Pick<RunEvent, "id" | "event" | "data">, withId: boolean): string {
  return withId ? `event: ${e.event}\ndata: ${e.data}\nid: ${e.id}\n\n` : `event: ${e.event}\ndata: ${e.data}\n\n`;
}

export function sseSynthetic(event: string, dataJson: string): string {
  return `event: ${event}\ndata: ${dataJson}\n\n`;
}
