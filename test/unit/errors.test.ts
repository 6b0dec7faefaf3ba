// The error list, its HTTP mapping and docs/ERRORS.md stay in step.
import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { ERROR_CODES, TroupeError } from "../../src/errors.ts";
import { STATUS_OF, errorReply } from "../../src/http/errors.ts";

describe("error codes", () => {
  it("every code has a status and a documented row", () => {
    const doc = readFileSync(new URL("../../docs/ERRORS.md", import.meta.url), "utf8");
    const rows = new Map([...doc.matchAll(/^\| ([A-Z_]+) \| (\d{3}) \| (.+) \|$/gm)].map((m) => [m[1], { status: Number(m[2]), text: m[3] }]));
    expect([...rows.keys()].sort()).toEqual(Object.keys(ERROR_CODES).sort());
    for (const [code, text] of Object.entries(ERROR_CODES)) {
      expect(STATUS_OF[code as keyof typeof ERROR_CODES]).toBe(rows.get(code)!.status);
      expect(rows.get(code)!.text).toBe(text);
    }
  });
  it("maps errors to JSON bodies", () => {
    expect(errorReply(new TroupeError("NOT_FOUND", "Thread with ID x not found"))).toMatchObject({
      status: 404,
      body: { detail: "Thread with ID x not found" },
    });
    const v = errorReply(new TroupeError("VALIDATION", "bad", { issues: [{ loc: ["body", "a"], msg: "Field required", type: "missing" }] }));
    expect(v).toMatchObject({ status: 422, body: { detail: [{ loc: ["body", "a"], msg: "Field required", type: "missing" }] } });
    expect(errorReply(new Error("boom"))).toMatchObject({ status: 500, body: { detail: "Internal Server Error" } });
  });
});
