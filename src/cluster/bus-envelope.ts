// What a bus notification carries: `<stream> <seq> i<body>` (the body inline) or
// `<stream> <seq> p<id>` (the body in cluster_payloads row <id>). A stream is one publisher's
// sequence on one channel; receivers order and check each stream by its seq.
import { createHash } from "node:crypto";

/** NOTIFY payloads must stay under 8000 bytes; bodies past this go through cluster_payloads. */
export const INLINE_LIMIT_BYTES = 7_000;

/** Postgres truncates identifiers (channel names) past 63 bytes: refuse such names instead. */
const MAX_CHANNEL_BYTES = 63;

export type Envelope = { stream: string; seq: number; inline: string } | { stream: string; seq: number; payloadId: string };

export const inlineEnvelope = (stream: string, seq: number, body: string): string => `${stream} ${seq} i${body}`;

/** The envelope's head; the payload row id is appended to it in SQL. */
export const payloadEnvelopeHead = (stream: string, seq: number): string => `${stream} ${seq} p`;

export function parseEnvelope(text: string): Envelope | undefined {
  const a = text.indexOf(" ");
  const b = a < 0 ? -1 : text.indexOf(" ", a + 1);
  if (b < 0 || b + 1 >= text.length) return undefined;
  const stream = text.slice(0, a);
  const seq = Number(text.slice(a + 1, b));
  if (!Number.isSafeInteger(seq)) return undefined;
  const kind = text[b + 1];
  const rest = text.slice(b + 2);
  if (kind === "i") return { stream, seq, inline: rest };
  if (kind === "p" && /^\d+$/.test(rest)) return { stream, seq, payloadId: rest };
  return undefined;
}

export const fitsInline = (body: string): boolean => body.length <= INLINE_LIMIT_BYTES / 3 || Buffer.byteLength(body) <= INLINE_LIMIT_BYTES;

/**
 * Channel names of one deployment: a short hash of its schema first (NOTIFY is database-wide, and
 * deployments may share a database), then the kind and the id, e.g. `t1a2b3c4d.run.<run id>`.
 */
export function channelName(schema: string, kind: string, id: string): string {
  const prefix = `t${createHash("sha256").update(schema).digest("hex").slice(0, 8)}`;
  const name = `${prefix}.${kind}.${id}`;
  if (Buffer.byteLength(name) > MAX_CHANNEL_BYTES) throw new Error(`bus channel name longer than ${MAX_CHANNEL_BYTES} bytes: ${name}`);
  return name;
}
