// Request ids (src/http/request-id.ts): a client's plain-token X-Request-Id is kept; made-up ids
// are UUID-shaped and unique, also across the switch to a new random series.
import { describe, expect, it } from "vitest";
import { RequestIds, requestIdOf } from "../../src/http/request-id.ts";

const UUID_SHAPED = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe("request ids", () => {
  it("keep a client's plain-token X-Request-Id and replace anything else", () => {
    expect(requestIdOf("abc-123_x.y:z/+=@")).toBe("abc-123_x.y:z/+=@");
    for (const bad of ["", "has space", "line\r\nbreak", "x".repeat(129), "é"]) {
      const made = requestIdOf(bad);
      expect(made).not.toBe(bad);
      expect(made).toMatch(UUID_SHAPED);
    }
    expect(requestIdOf(undefined)).toMatch(UUID_SHAPED);
  });

  it("are made UUID-shaped and unique, also past the end of a series (a new random prefix)", () => {
    const ids = new RequestIds(1000);
    const seen = new Set<string>();
    const prefixes = new Set<string>();
    for (let i = 0; i < 3500; i++) {
      const id = ids.make();
      expect(id).toMatch(UUID_SHAPED);
      seen.add(id);
      prefixes.add(id.slice(0, 27));
    }
    expect(seen.size).toBe(3500);
    expect(prefixes.size).toBe(4); // 1000 ids a series: 4 series drawn
  });

  it("count in the last 9 digits: consecutive ids differ only there", () => {
    const ids = new RequestIds();
    const a = ids.make();
    const b = ids.make();
    expect(b.slice(0, 27)).toBe(a.slice(0, 27));
    expect(Number(b.slice(27)) - Number(a.slice(27))).toBe(1);
  });
});
