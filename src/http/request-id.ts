// Request ids: the client's X-Request-Id when it is a plain token, else one made up here. Every
// request gets one (it is returned in X-Request-Id and logged), so making one must cost little.
import { randomBytes } from "node:crypto";

/** A client's X-Request-Id is kept when it is a plain token (it is echoed in a header and logged). */
const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:/+=@-]{1,128}$/;

/**
 * Made-up ids are UUID-shaped (8-4-4-4-12 hex digits): 27 random digits drawn per series, then the
 * series' counter as 9 decimal digits (100000000 …). A small integer printed in decimal costs a
 * third of `toString(16).padStart(12)`; after 900 million ids a new random series starts, so ids
 * stay unique per process.
 */
export class RequestIds {
  private prefix = "";
  private next = 0;

  constructor(private readonly seriesSize = 900_000_000) {
    this.newSeries();
  }

  make(): string {
    if (this.next === this.seriesSize) this.newSeries();
    return this.prefix + (100_000_000 + this.next++);
  }

  private newSeries(): void {
    const hex = randomBytes(14).toString("hex");
    this.prefix = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 23)}`;
    this.next = 0;
  }
}

const ids = new RequestIds();

export function requestIdOf(header: string | undefined): string {
  return header !== undefined && CLIENT_REQUEST_ID.test(header) ? header : ids.make();
}
