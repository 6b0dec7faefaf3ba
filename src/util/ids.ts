// Id minting: UUID v7 for server-minted ids (time-ordered, so LMDB keys sort by creation),
// UUID v5 for the deterministic default-assistant ids the reference requires.
import { createHash, randomBytes } from "node:crypto";

let lastMs = 0;
let seq = 0;

/** RFC 9562 UUID v7 with a 12-bit monotonic counter in rand_a so ids minted in one ms stay ordered. */
export function uuid7(): string {
  let ms = Date.now();
  if (ms <= lastMs) {
    seq++;
    if (seq > 0xfff) {
      lastMs++;
      seq = 0;
    }
    ms = lastMs;
  } else {
    lastMs = ms;
    seq = 0;
  }
  const b = randomBytes(16);
  b[0] = (ms / 2 ** 40) & 0xff;
  b[1] = (ms / 2 ** 32) & 0xff;
  b[2] = (ms >>> 24) & 0xff;
  b[3] = (ms >>> 16) & 0xff;
  b[4] = (ms >>> 8) & 0xff;
  b[5] = ms & 0xff;
  b[6] = 0x70 | ((seq >>> 8) & 0x0f);
  b[7] = seq & 0xff;
  b[8] = (b[8] & 0x3f) | 0x80;
  return format(b);
}

export function uuid5(name: string, namespace: string): string {
  const ns = Buffer.from(namespace.replace(/-/g, ""), "hex");
  const hash = createHash("sha1").update(ns).update(Buffer.from(name, "utf8")).digest();
  const b = hash.subarray(0, 16);
  b[6] = (b[6] & 0x0f) | 0x50;
  b[8] = (b[8] & 0x3f) | 0x80;
  return format(b);
}

function format(b: Uint8Array): string {
  const h = Buffer.from(b).toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

const UUID_RE = /^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i;
export const isUuid = (s: string): boolean => UUID_RE.test(s);

/**
 * The form ids are stored under: lower case, with dashes. Clients may send upper case (Swift's
 * UUID().uuidString) or bare hex, which FastAPI-based servers parse as the same UUID.
 */
/** `v` in canonical form when it is a UUID string; undefined for anything else. */
export function canonicalUuidOf(v: unknown): string | undefined {
  return typeof v === "string" && isUuid(v) ? canonicalUuid(v) : undefined;
}

export function canonicalUuid(s: string): string {
  const hex = s.toLowerCase();
  if (hex.length !== 32) return hex;
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** Namespace of default assistant ids (not the RFC OID namespace: digits 7-8 swapped, as upstream). */
export const ASSISTANT_NAMESPACE = "6ba7b821-9dad-11d1-80b4-00c04fd430c8";
export const defaultAssistantId = (graphId: string): string => uuid5(graphId, ASSISTANT_NAMESPACE);
