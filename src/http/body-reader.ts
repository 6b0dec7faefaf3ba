// A request body as it arrives from uWebSockets.js, read only once the request is admitted: the
// dispatcher decides rate limits and API keys from the headers first, and answers a refusal
// before any of the body is kept. Until the request is admitted (custom auth may take a while) at
// most UNADMITTED_BODY_BYTES are held and the socket is paused beyond that; a body over the limit
// is not kept at all (413). A body left unread by a reply is dropped as it comes (the client gets
// to finish sending and read the reply: closing on a client still sending makes it see a reset
// instead), and the connection closed once more than the body limit was dropped.
import type { HttpResponse } from "uWebSockets.js";
import { TroupeError } from "../errors.ts";
import type { BodyArrival } from "./dispatch.ts";
import { errorReply } from "./errors.ts";
import type { Reply } from "./types.ts";

/** body bytes held for a request not yet authenticated */
export const UNADMITTED_BODY_BYTES = 64 * 1024;

/** A refusal the front end sends itself (before the dispatcher, which adds the common headers) */
export const frontEndError = (code: "PAYLOAD_TOO_LARGE" | "URI_TOO_LONG" | "BAD_REQUEST", detail: string, headers: Record<string, string> | undefined): Reply =>
  errorReply(new TroupeError(code, detail, headers ? { headers } : {}));

export const tooLarge = (max: number, headers?: Record<string, string>): Reply =>
  frontEndError("PAYLOAD_TOO_LARGE", `Request body exceeds the limit of ${max} bytes`, headers);

/** a fresh reply each time: the dispatcher adds each request's headers to the reply it returns */
const gone = (): Reply => errorReply(new TroupeError("BAD_REQUEST", "The client went away before sending the whole body"));

export class BodyReader implements BodyArrival {
  private chunks: Buffer[] = [];
  private size = 0;
  private admitted = false;
  private paused = false;
  private discarded = -1; // ≥ 0 once the body is dropped as it comes
  /** the last chunk arrived */
  finished = false;
  private outcome: Reply | null | undefined; // null = body complete, a Reply = refused
  private wake: ((r: Reply | undefined) => void) | undefined;

  constructor(
    private readonly res: HttpResponse,
    private readonly req: { body: Buffer | null },
    private readonly maxBytes: number,
    private readonly commonHeaders: Record<string, string> | undefined,
  ) {}

  readonly onData = (ab: ArrayBuffer, isLast: boolean): void => {
    if (isLast) this.finished = true;
    if (this.discarded >= 0) {
      this.discarded += ab.byteLength;
      if (!isLast && this.discarded > this.maxBytes) this.res.close();
      return;
    }
    this.size += ab.byteLength;
    if (this.size > this.maxBytes) {
      this.drop();
      this.settle(tooLarge(this.maxBytes, this.commonHeaders));
      return;
    }
    // uWS reuses its buffer after the callback: copy
    this.chunks.push(Buffer.from(new Uint8Array(ab)));
    if (isLast) {
      this.req.body = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
      this.chunks = [];
      this.settle(null);
    } else if (!this.admitted && !this.paused && this.size > UNADMITTED_BODY_BYTES) {
      this.paused = true;
      this.res.pause();
    }
  };

  /** The request is admitted: read the body in full. Resolves once it is in `req.body`, or with the reply refusing it. */
  complete(): Promise<Reply | undefined> {
    this.admitted = true;
    this.unpause();
    if (this.outcome !== undefined) return Promise.resolve(this.outcome ?? undefined);
    return new Promise((resolve) => (this.wake = resolve));
  }

  /** A reply goes out before the body was read: drop what came and what comes. */
  discard(): void {
    this.drop();
    this.unpause();
  }

  /** the client disconnected */
  abort(): void {
    this.paused = false; // an aborted response must not be touched
    this.drop();
    this.settle(gone());
  }

  private drop(): void {
    this.chunks = [];
    if (this.discarded < 0) this.discarded = 0;
  }

  private unpause(): void {
    if (!this.paused) return;
    this.paused = false;
    this.res.resume();
  }

  private settle(outcome: Reply | null): void {
    if (this.outcome !== undefined) return;
    this.outcome = outcome;
    this.wake?.(outcome ?? undefined);
    this.wake = undefined;
  }
}
