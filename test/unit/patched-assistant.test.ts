// patchedAssistant (src/storage/records.ts): the one PATCH merge both storage adapters store.
import { describe, expect, it } from "vitest";
import { patchedAssistant } from "../../src/storage/records.ts";
import { assistantRecord } from "../helpers/records.ts";

describe("patchedAssistant", () => {
  const a = assistantRecord("a1", { metadata: { keep: 1, over: "old" }, description: "d", context: { c: 1 } });

  it("replaces the fields given, merges metadata key by key, stamps the version and time", () => {
    const next = patchedAssistant(a, { name: "n2", metadata: { over: "new", added: true }, config: { tags: ["t"] } }, 7, "2026-11-28T00:00:00.000Z");
    expect(next).toEqual({
      ...a,
      name: "n2",
      metadata: { keep: 1, over: "new", added: true },
      config: { tags: ["t"] },
      version: 7,
      updated_at: "2026-11-28T00:00:00.000Z",
    });
    expect(a.metadata).toEqual({ keep: 1, over: "old" }); // the stored record is not changed in place
  });

  it("keeps what is not given; a null description or context is a value, not an absence", () => {
    expect(patchedAssistant(a, {}, 2, "t")).toEqual({ ...a, version: 2, updated_at: "t" });
    const cleared = patchedAssistant(a, { description: null, context: null }, 3, "t");
    expect(cleared.description).toBeNull();
    expect(cleared.context).toBeNull();
  });
});
