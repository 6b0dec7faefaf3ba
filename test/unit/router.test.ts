// The router (src/http/router.ts): static segments win over params; paths of param-less routes
// are looked up whole first, and that shortcut answers exactly as the trie does.
import { describe, expect, it } from "vitest";
import { Router, type MatchResult } from "../../src/http/router.ts";
import { json, type RouteDef } from "../../src/http/types.ts";

const def = (method: string, path: string): RouteDef =>
  ({ method, path, operationId: `${method} ${path}`, summary: "", tag: "t", handler: () => json(null) }) as RouteDef;

function router(): Router {
  const r = new Router();
  for (const [m, p] of [
    ["GET", "/ok"],
    ["GET", "/"],
    ["POST", "/threads"],
    ["POST", "/threads/search"],
    ["GET", "/threads/:thread_id"],
    ["DELETE", "/threads/:thread_id"],
    ["GET", "/threads/:thread_id/runs"],
    ["POST", "/threads/:thread_id/runs"],
  ] as const)
    r.add(def(m, p));
  return r;
}

const described = (m: MatchResult) =>
  "route" in m ? `${m.route.method} ${m.route.path} ${JSON.stringify(m.params)}` : "notFound" in m ? "404" : `405 ${m.methodNotAllowed.join(",")}`;

describe("router", () => {
  it("matches static paths whole, params through the trie, and refuses the rest as 404 or 405", () => {
    const r = router();
    expect(described(r.match("GET", "/ok"))).toBe("GET /ok {}");
    expect(described(r.match("HEAD", "/ok"))).toBe("GET /ok {}");
    expect(described(r.match("GET", "/ok/"))).toBe("GET /ok {}");
    expect(described(r.match("GET", "/"))).toBe("GET / {}");
    expect(described(r.match("POST", "/ok"))).toBe("405 GET");
    expect(described(r.match("POST", "/threads/search"))).toBe("POST /threads/search {}");
    // a static segment wins over the param even for a method only the param route has
    expect(described(r.match("GET", "/threads/search"))).toBe("405 POST");
    expect(described(r.match("GET", "/threads/abc"))).toBe('GET /threads/:thread_id {"thread_id":"abc"}');
    expect(described(r.match("GET", "/threads/a%20b/runs"))).toBe('GET /threads/:thread_id/runs {"thread_id":"a b"}');
    expect(described(r.match("GET", "/nope"))).toBe("404");
    expect(described(r.match("GET", "/ok/more"))).toBe("404");
  });

  it("gives a fresh params object per match (handlers may write to it)", () => {
    const r = router();
    const a = r.match("GET", "/ok");
    const b = r.match("GET", "/ok");
    expect("route" in a && "route" in b && a.params !== b.params).toBe(true);
  });
});
