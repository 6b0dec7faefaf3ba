// The JSON texts the Postgres adapter writes: PostgreSQL refuses a whole json/jsonb text holding
// an unpaired UTF-16 surrogate (the fuzz test's POST /threads with graph_id "\ud800" answered 500).
import { jsonbText, jsonText } from "../../src/storage/postgres/json-columns.ts";

test("an unpaired surrogate in a value or a key is written as U+FFFD; pairs and look-alike text are kept", () => {
  expect(JSON.parse(jsonText({ a: "x\ud800y", ["k\udc00"]: ["\ud83d\ude00", "\udbff"] }))).toEqual({ a: "x\ufffdy", ["k\ufffd"]: ["\ud83d\ude00", "\ufffd"] });
  expect(jsonText({ p: "\\ud800 is text" })).toBe(JSON.stringify({ p: "\\ud800 is text" }));
  expect(jsonText({ plain: 1 })).toBe('{"plain":1}');
  expect(JSON.parse(jsonbText({ g: "\ud800", n: "a\u0000" }))).toEqual({ g: "\ufffd", n: "a\ue000\u0001" });
  for (const text of [jsonText({ s: "\udfff\ud800" }), jsonbText({ s: "\udfff\ud800" })]) expect(text).not.toMatch(/\\ud[89a-f]/);
});
