// Handler bodies and queries are typed from their JSON schemas (issue 19.4). These assertions are
// checked by the type checker (`npm run typecheck` covers test/); a wrong inference fails the build.
import { describe, expectTypeOf, it } from "vitest";
import { arrayOf, body, enumOf, int, limit, nullable, object, offset, str, strings, withDefault } from "../../src/http/schemas/common.ts";
import type { Accepted, JsonSchema } from "../../src/http/schema-types.ts";
import { json, route, type RouteDef } from "../../src/http/types.ts";
import type { JsonObject } from "../../src/util/json.ts";

const search = body(
  {
    namespace_prefix: strings,
    filter: nullable(object),
    limit: limit(1000, 10),
    offset,
    sort: enumOf(["asc", "desc"]),
    ids: arrayOf(int),
  },
  ["namespace_prefix"],
);

describe("route types", () => {
  it("infer a body from its schema: required and defaulted properties present, the rest optional", () => {
    expectTypeOf<Accepted<typeof search>>().toEqualTypeOf<{
      namespace_prefix: string[];
      limit: number;
      offset: number;
      filter?: JsonObject | null;
      sort?: "asc" | "desc";
      ids?: number[];
    }>();
    const r: RouteDef = route({
      method: "POST",
      path: "/x",
      operationId: "x",
      summary: "x",
      tag: "t",
      body: search,
      handler: ({ body: b }) => {
        expectTypeOf(b.limit).toEqualTypeOf<number>();
        expectTypeOf(b.filter).toEqualTypeOf<JsonObject | null | undefined>();
        // @ts-expect-error: not a property of the schema
        void b.unknown_field;
        return json(b.namespace_prefix);
      },
    });
    void r;
  });

  it("type a query like a body, and leave a plain JsonSchema's value unknown", () => {
    const plain: JsonSchema = { type: "object" };
    route({
      method: "GET",
      path: "/y",
      operationId: "y",
      summary: "y",
      tag: "t",
      query: body({ key: str }, ["key"]),
      body: plain,
      handler: ({ query, body: b }) => {
        expectTypeOf(query).toEqualTypeOf<{ key: string }>();
        expectTypeOf(b).toEqualTypeOf<unknown>();
        return json(null);
      },
    });
  });

  it("keep an enum's literal types, also from a typed array and behind a default", () => {
    type Mode = "a" | "b";
    const MODES: readonly Mode[] = ["a", "b"];
    const q = body({ mode: withDefault(arrayOf(enumOf(MODES)), ["a"]) });
    expectTypeOf<Accepted<typeof q>>().toEqualTypeOf<{ mode: Mode[] }>();
  });
});
