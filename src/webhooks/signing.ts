// Standard Webhooks headers (https://www.standardwebhooks.com): the delivery's stable id, the
// attempt's timestamp and, with `webhooks.signing_secret`, a signature receivers can verify.
import { Webhook } from "standardwebhooks";

export class DeliverySigner {
  private readonly webhook: Webhook | null;

  /** `secret`: a Standard Webhooks secret (`whsec_` + base64); null = unsigned deliveries */
  constructor(secret: string | null) {
    this.webhook = secret === null ? null : new Webhook(secret);
  }

  get signs(): boolean {
    return this.webhook !== null;
  }

  /** The Standard Webhooks headers of one attempt sending `body` at `at`. */
  headers(deliveryId: string, body: string, at: Date): Record<string, string> {
    const headers: Record<string, string> = { "webhook-id": deliveryId, "webhook-timestamp": String(Math.floor(at.getTime() / 1000)) };
    if (this.webhook) headers["webhook-signature"] = this.webhook.sign(deliveryId, at, body);
    return headers;
  }
}

/** Why `secret` cannot sign (for the config error), or undefined when it can. */
export function signingSecretProblem(secret: string): string | undefined {
  const key = secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret;
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(key) || key.length % 4 !== 0) return 'must be a Standard Webhooks secret: "whsec_" followed by base64';
  const bytes = Buffer.from(key, "base64").length;
  if (bytes < 24 || bytes > 64) return `must decode to 24 to 64 bytes (Standard Webhooks); got ${bytes}`;
  return undefined;
}
