// BodyReader (src/http/body-reader.ts): what a request body costs before and after admission. The
// uWS response is a stand-in recording pause/resume/close (uWS calls onData, we call these).
import { describe, expect, it } from "vitest";
import type { HttpResponse } from "uWebSockets.js";
import { BodyReader, UNADMITTED_BODY_BYTES } from "../../src/http/body-reader.ts";

function reader(max = 1024 * 1024) {
  const calls: string[] = [];
  const res = { pause: () => calls.push("pause"), resume: () => calls.push("resume"), close: () => calls.push("close") } as unknown as HttpResponse;
  const req = { body: null as Buffer | null };
  return { r: new BodyReader(res, req, max, undefined), req, calls };
}
const chunk = (n: number) => new Uint8Array(n).fill(120).buffer;

describe("BodyReader", () => {
  it("holds at most UNADMITTED_BODY_BYTES (plus the chunk that crossed it) before admission, pausing the socket", async () => {
    const { r, req, calls } = reader();
    r.onData(chunk(40_000), false);
    expect(calls).toEqual([]);
    r.onData(chunk(40_000), false);
    expect(calls).toEqual(["pause"]); // past 64 KiB, not yet admitted
    expect(80_000).toBeGreaterThan(UNADMITTED_BODY_BYTES);
    const done = r.complete(); // admitted: read on
    expect(calls).toEqual(["pause", "resume"]);
    r.onData(chunk(10), true);
    expect(await done).toBeUndefined();
    expect(req.body?.length).toBe(80_010);
  });

  it("refuses a body over the limit with 413, keeping none of it", async () => {
    const { r, req } = reader(100);
    const done = r.complete();
    r.onData(chunk(60), false);
    r.onData(chunk(60), false);
    expect(await done).toMatchObject({ status: 413 });
    r.onData(chunk(60), true);
    expect(req.body).toBeNull();
  });

  it("drops a body left unread by a refusal, and closes when more than the body limit follows", () => {
    const { r, req, calls } = reader(1024 * 1024);
    r.onData(chunk(70_000), false); // paused, not admitted
    r.discard(); // a 401 went out
    expect(calls).toEqual(["pause", "resume"]);
    for (let i = 0; i < 17; i++) r.onData(chunk(64 * 1024), false);
    expect(calls).toContain("close");
    expect(req.body).toBeNull();
  });

  it("settles when the client goes away, so the request does not wait forever", async () => {
    const { r } = reader();
    const done = r.complete();
    r.abort();
    expect(await done).toMatchObject({ status: 400 });
  });
});
