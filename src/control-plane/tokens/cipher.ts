// Encryption at rest of OAuth token secrets: AES-256-GCM with a 32-byte key from the environment
// (TROUPE_TOKEN_ENCRYPTION_KEY, base64 or hex), a fresh 12-byte IV per seal, and the record's
// identity as additional authenticated data, so a sealed secret cannot be moved to another record.
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import { TroupeError } from "../../errors.ts";

export const ENCRYPTION_KEY_ENV = "TROUPE_TOKEN_ENCRYPTION_KEY";

export type SealedSecret = {
  v: 1;
  /** first 16 hex chars of sha256(key): says which key sealed it */
  kid: string;
  iv: Uint8Array;
  tag: Uint8Array;
  data: Uint8Array;
};

/** Decodes a 32-byte key given as 64 hex chars or base64/base64url; throws naming the variable. */
export function parseEncryptionKey(raw: string, name = ENCRYPTION_KEY_ENV): Buffer {
  const s = raw.trim();
  const bytes = /^[0-9a-fA-F]{64}$/.test(s)
    ? Buffer.from(s, "hex")
    : /^[A-Za-z0-9+/_-]+={0,2}$/.test(s)
      ? Buffer.from(s.replace(/-/g, "+").replace(/_/g, "/"), "base64")
      : null;
  if (!bytes || bytes.length !== 32) {
    throw new Error(
      `${name} must be 32 bytes encoded as base64 or hex (e.g. the output of \`openssl rand -base64 32\`); got ${bytes ? `${bytes.length} bytes` : "an undecodable value"}`,
    );
  }
  return bytes;
}

export class TokenCipher {
  readonly kid: string;

  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error("AES-256-GCM needs a 32-byte key");
    this.kid = createHash("sha256").update(key).digest("hex").slice(0, 16);
  }

  /** The cipher from the environment; null when the variable is unset (creating tokens is then refused). */
  static fromEnv(env: NodeJS.ProcessEnv = process.env): TokenCipher | null {
    const raw = env[ENCRYPTION_KEY_ENV];
    return raw ? new TokenCipher(parseEncryptionKey(raw)) : null;
  }

  seal(plaintext: string, aad: string): SealedSecret {
    const iv = randomBytes(12);
    const c = createCipheriv("aes-256-gcm", this.key, iv);
    c.setAAD(Buffer.from(aad, "utf8"));
    const data = Buffer.concat([c.update(plaintext, "utf8"), c.final()]);
    return { v: 1, kid: this.kid, iv, tag: c.getAuthTag(), data };
  }

  open(s: SealedSecret, aad: string): string {
    if (s.kid !== this.kid) throw new TroupeError("INTERNAL", `Token secret was sealed with another encryption key (kid ${s.kid}, current ${this.kid})`);
    const d = createDecipheriv("aes-256-gcm", this.key, Buffer.from(s.iv));
    d.setAAD(Buffer.from(aad, "utf8"));
    d.setAuthTag(Buffer.from(s.tag));
    try {
      return Buffer.concat([d.update(Buffer.from(s.data)), d.final()]).toString("utf8");
    } catch (err) {
      throw new TroupeError("INTERNAL", "Token secret failed authentication (tampered or wrong record)", { cause: err });
    }
  }
}
