// Handler bodies and queries are typed from their JSON schemas (issue 19.4). These assertions are
// checked by the type checker (`npm run typecheck` covers test/); a wrong inference fails the build.
import { describe, expectTypeOf, it } from "vitest";
import { arrayOf, body, enumOf, int, limit, nullable, object, offset, str, strings, withDefault } from "../../src/http/schemas/common.ts";
import type { Accepted, JsonSchema } from "../../src/http/schema-types.ts";
import { json, route, type RouteDef } from "../../src/http/types.ts";
import type { JsonObject, RunnableConfigJson } from "../../src/util/json.ts";
import type { runCreateSchema, RunCreateBody } from "../../src/api/run-request.ts";
import type { cronCreateSchema, cronPatchSchema } from "../../src/api/crons.ts";
import type { StreamMode } from "../../src/storage/records.ts";

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

  it("type a run create body from runCreateSchema: a wrong field type does not compile", () => {
    type Run = Accepted<typeof runCreateSchema>;
    expectTypeOf<Run>().toEqualTypeOf<RunCreateBody>();
    expectTypeOf<Run["assistant_id"]>().toEqualTypeOf<string>();
    expectTypeOf<Run["multitask_strategy"]>().toEqualTypeOf<"reject" | "interrupt" | "rollback" | "enqueue" | null | undefined>();
    expectTypeOf<Run["stream_mode"]>().toEqualTypeOf<StreamMode | StreamMode[] | null | undefined>();
    expectTypeOf<Run["interrupt_before"]>().toEqualTypeOf<"*" | string[] | null | undefined>();
    expectTypeOf<Run["after_seconds"]>().toEqualTypeOf<number | null | undefined>();
    expectTypeOf<Run["config"]>().toEqualTypeOf<RunnableConfigJson | null | undefined>();
    expectTypeOf<Run["command"]>().toEqualTypeOf<JsonObject | null | undefined>();
    expectTypeOf<Run["checkpoint"]>().toEqualTypeOf<
      { checkpoint_id?: string; checkpoint_ns?: string; checkpoint_map?: JsonObject | null } | null | undefined
    >();
    const ok: RunCreateBody = { assistant_id: "agent", stream_mode: ["values", "updates"], after_seconds: 5, on_disconnect: "cancel" };
    // @ts-expect-error: assistant_id is required
    const noAssistant: RunCreateBody = { input: {} };
    // @ts-expect-error: an assistant id is a string
    const numericAssistant: RunCreateBody = { assistant_id: 1 };
    // @ts-expect-error: not a multitask strategy
    const badStrategy: RunCreateBody = { assistant_id: "agent", multitask_strategy: "queue" };
    // @ts-expect-error: not a stream mode
    const badMode: RunCreateBody = { assistant_id: "agent", stream_mode: ["values", "everything"] };
    // @ts-expect-error: after_seconds is a number
    const badDelay: RunCreateBody = { assistant_id: "agent", after_seconds: "5" };
    void [ok, noAssistant, numericAssistant, badStrategy, badMode, badDelay];
  });

  it("type a cron body from the run fields it replays plus its own", () => {
    type Cron = Accepted<typeof cronCreateSchema>;
    type Run = Accepted<typeof runCreateSchema>;
    expectTypeOf<Cron["assistant_id"]>().toEqualTypeOf<string>();
    expectTypeOf<Cron["schedule"]>().toEqualTypeOf<string>();
    expectTypeOf<Cron["stream_mode"]>().toEqualTypeOf<Run["stream_mode"]>();
    expectTypeOf<Cron["webhook"]>().toEqualTypeOf<Run["webhook"]>();
    expectTypeOf<Cron["on_run_completed"]>().toEqualTypeOf<"delete" | "keep" | null | undefined>();
    expectTypeOf<Accepted<typeof cronPatchSchema>["schedule"]>().toEqualTypeOf<string | undefined>();
    const ok: Cron = { assistant_id: "agent", schedule: "*/5 * * * *", input: { n: 1 }, enabled: false };
    // @ts-expect-error: schedule is required
    const noSchedule: Cron = { assistant_id: "agent" };
    // @ts-expect-error: enabled is a boolean
    const badEnabled: Cron = { assistant_id: "agent", schedule: "* * * * *", enabled: "yes" };
    // @ts-expect-error: a run field a cron does not replay
    const notReplayed: Cron = { assistant_id: "agent", schedule: "* * * * *", checkpoint_id: "c" };
    // @ts-expect-error: a cron's multitask strategy is a run's
    const badStrategy: Cron = { assistant_id: "agent", schedule: "* * * * *", multitask_strategy: "queue" };
    void [ok, noSchedule, badEnabled, notReplayed, badStrategy];
  });
});
