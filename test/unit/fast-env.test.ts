// useFastEnv: process.env becomes a plain copy that still reads, writes (as strings) and deletes
// like process.env. (Vitest runs each file in its own process, so replacing it here is contained.)
import { describe, expect, it } from "vitest";
import { useFastEnv } from "../../src/util/fast-env.ts";

describe("useFastEnv", () => {
  it("keeps every variable, stores assigned values as strings, and deletes", () => {
    process.env.TROUPE_FAST_ENV_BEFORE = "kept";
    const before = { ...process.env };
    useFastEnv();
    expect({ ...process.env }).toEqual(before);
    expect(process.env.TROUPE_FAST_ENV_BEFORE).toBe("kept");
    (process.env as Record<string, unknown>).TROUPE_FAST_ENV_NUMBER = 42;
    expect(process.env.TROUPE_FAST_ENV_NUMBER).toBe("42");
    delete process.env.TROUPE_FAST_ENV_BEFORE;
    expect("TROUPE_FAST_ENV_BEFORE" in process.env).toBe(false);
    expect(Object.keys(process.env)).toContain("TROUPE_FAST_ENV_NUMBER");
  });
});
