// The run-tree shortcut (untraced-run-trees.ts) reaches the copy of LangChain a graph runs with:
// LangChain's next to the graph's own LangGraph in a user project, ours for graphs without one.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { MemorySaver } from "@langchain/langgraph";
import { AsyncLocalStorageProviderSingleton as ours } from "@langchain/core/singletons";
import { afterAll, describe, expect, it } from "vitest";
import { GraphRegistry } from "../../src/actors/graph-registry.ts";
import { hasUntracedRunTrees } from "../../src/actors/untraced-run-trees.ts";
import { makeUserProject } from "../fixtures/make-user-project.ts";

const dir = mkdtempSync(join(tmpdir(), "troupe-runtrees-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("graph registry", () => {
  it("installs the run-tree shortcut in the LangChain copy of each graph's LangGraph", async () => {
    await makeUserProject(dir);
    const registry = new GraphRegistry(
      [
        { graphId: "user_graph", filePath: join(dir, "graph.ts"), exportName: "graph" },
        { graphId: "echo", filePath: fileURLToPath(new URL("../../examples/echo.ts", import.meta.url)), exportName: "graph" },
      ],
      { checkpointer: () => new MemorySaver(), store: undefined },
    );
    const theirs = (await import(pathToFileURL(join(dir, "node_modules/@langchain/core/dist/singletons/index.js")).href)) as {
      AsyncLocalStorageProviderSingleton: object;
    };
    expect(theirs.AsyncLocalStorageProviderSingleton).not.toBe(ours);
    expect(hasUntracedRunTrees(theirs.AsyncLocalStorageProviderSingleton)).toBe(false);
    expect(hasUntracedRunTrees(ours)).toBe(false);

    const user = await registry.get("user_graph", {});
    expect(hasUntracedRunTrees(theirs.AsyncLocalStorageProviderSingleton)).toBe(true);
    expect(hasUntracedRunTrees(ours)).toBe(false);
    await registry.get("echo", {});
    expect(hasUntracedRunTrees(ours)).toBe(true);

    const out = [];
    for await (const chunk of await user.stream({ messages: [{ role: "user", content: "hi" }] }, { configurable: { thread_id: "t" } })) out.push(chunk);
    expect(JSON.stringify(out)).toContain("user project: hi");
  });
});
