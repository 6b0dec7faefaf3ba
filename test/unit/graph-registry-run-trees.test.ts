// The run-tree shortcut (untraced-run-trees.ts) reaches the copy of LangChain a graph runs with:
// LangChain's next to the graph's own LangGraph in a user project, ours for graphs without one.
// Observed by its effect: an untraced runnable call no longer constructs a LangSmith RunTree.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { MemorySaver } from "@langchain/langgraph";
import { AsyncLocalStorageProviderSingleton as ours } from "@langchain/core/singletons";
import { afterAll, describe, expect, it } from "vitest";
import { GraphRegistry } from "../../src/actors/graph-registry.ts";
import { makeUserProject } from "../fixtures/make-user-project.ts";

interface Singleton {
  runWithConfig(config: unknown, callback: () => unknown): unknown;
  getInstance(): { getStore(): unknown };
}

/** Counts the RunTree constructions of a LangChain copy (its RunTree class asks getDefaultConfig once per construction). */
function constructionsOf(singleton: Singleton): () => number {
  const tree = singleton.runWithConfig({}, () => singleton.getInstance().getStore()) as { constructor: { getDefaultConfig(): unknown } };
  const RunTree = tree.constructor;
  const defaults = RunTree.getDefaultConfig.bind(RunTree);
  let n = 0;
  RunTree.getDefaultConfig = () => {
    n++;
    return defaults();
  };
  // constructions over 5 untraced calls (not the template an install makes)
  return () => {
    n = 0;
    for (let i = 0; i < 5; i++) singleton.runWithConfig({}, () => undefined);
    return n;
  };
}

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
    const theirs = (
      (await import(pathToFileURL(join(dir, "node_modules/@langchain/core/dist/singletons/index.js")).href)) as {
        AsyncLocalStorageProviderSingleton: Singleton;
      }
    ).AsyncLocalStorageProviderSingleton;
    expect(theirs).not.toBe(ours);
    const user = await registry.get("user_graph", {}); // loads the project's LangGraph (and sets up its storage)
    const theirConstructions = constructionsOf(theirs);
    const ourConstructions = constructionsOf(ours);
    expect(theirConstructions()).toBe(0);
    expect(ourConstructions()).toBe(5); // no graph without its own LangGraph loaded yet
    await registry.get("echo", {});
    expect(ourConstructions()).toBe(0);

    const out = [];
    for await (const chunk of await user.stream({ messages: [{ role: "user", content: "hi" }] }, { configurable: { thread_id: "t" } })) out.push(chunk);
    expect(JSON.stringify(out)).toContain("user project: hi");
  });
});
