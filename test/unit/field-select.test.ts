import { describe, expect, it } from "vitest";
import { selectState } from "../../src/api/field-select.ts";

describe("selectState", () => {
  const state = { values: { messages: [1, 2], count: 3 }, next: ["a"], checkpoint: { checkpoint_id: "c" }, created_at: null };

  it("returns the whole state without fields", () => {
    expect(selectState(state, undefined)).toBe(state);
    expect(selectState(state, [])).toBe(state);
  });

  it("picks top-level fields and single value keys", () => {
    expect(selectState(state, ["next", "created_at"])).toEqual({ next: ["a"], created_at: null });
    expect(selectState(state, ["values.count", "values.missing"])).toEqual({ values: { count: 3 } });
  });

  it("lets 'values' win over its keys, whatever the order", () => {
    expect(selectState(state, ["values.count", "values"])).toEqual({ values: state.values });
  });

  it("gives an empty values object when the values are not an object", () => {
    expect(selectState({ values: [1, 2] }, ["values.x"])).toEqual({ values: {} });
  });
});
