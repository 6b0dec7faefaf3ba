// The API key format and its one-way form: `trp_` + 43 base64url chars (32 random bytes).
// Only the sha256 hash and a short display prefix are ever stored.
import { createHash, randomBytes } from "node:crypto";

const KEY_RE = /^trp_[A-Za-z0-9_-]{43}$/;

/** Characters of the key shown in listings and used to revoke it ("trp_" + 12 chars). */
export const PREFIX_LENGTH = 16;

export interface NewApiKey {
  key: string;
  hash: string;
  prefix: string;
}

export function generateApiKey(): NewApiKey {
  const key = `trp_${randomBytes(32).toString("base64url")}`;
  return { key, hash: hashApiKey(key), prefix: key.slice(0, PREFIX_LENGTH) };
}

export const hashApiKey = (key: string): string => createHash("sha256").update(key, "utf8").digest("hex");

/** Cheap shape check done before any lookup: garbage never reaches the database. */
export const isWellFormedApiKey = (key: string): boolean => KEY_RE.test(key);
