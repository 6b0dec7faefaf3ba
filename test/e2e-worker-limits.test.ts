// The V8 limits a server gives its actor workers (src/server/actor-workers.ts), as a graph running
// in one of them sees them: a young generation of 24 MB on LMDB and 96 MB on PostgreSQL (its runs
// live through their statements' round trips; bench/RESULTS.md, session 27). Runs once per backend
// (vitest.config.ts: the e2e and e2e-postgres projects).
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO, TEST_BACKEND } from "./helpers/server.ts";
import { useServer } from "./helpers/suite.ts";

const fx = useServer({ config: join(REPO, "test/fixtures/worker-limits/service.json") });

describe("actor worker limits", () => {
  it(`a young generation of ${TEST_BACKEND === "postgres" ? 96 : 24} MB on ${TEST_BACKEND}`, async () => {
    const out = (await fx.client.runs.wait(null, "limits", { input: { messages: [] } })) as { messages: { content: string }[] };
    const limits = JSON.parse(out.messages.at(-1)!.content) as { maxYoungGenerationSizeMb: number; maxOldGenerationSizeMb: number };
    expect(limits.maxYoungGenerationSizeMb).toBe(TEST_BACKEND === "postgres" ? 96 : 24);
    expect(limits.maxOldGenerationSizeMb).toBe(4096);
  });
});
