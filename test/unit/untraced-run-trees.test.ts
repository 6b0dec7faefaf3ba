// The copied run trees an actor worker gives LangChain's untraced runnable calls: the same store
// LangChain builds itself (a RunTree of its class, fields and values; the config; context
// variables), fresh ids and parts per call, and calls a tracer takes left to LangChain.
import "@langchain/langgraph"; // sets up LangChain's AsyncLocalStorage, as a graph module does
import { BaseCallbackHandler } from "@langchain/core/callbacks/base";
import { CallbackManager } from "@langchain/core/callbacks/manager";
import { getContextVariable, setContextVariable } from "@langchain/core/context";
import { AsyncLocalStorageProviderSingleton } from "@langchain/core/singletons";
import { RunTree, isRunTree } from "langsmith/run_trees";
import { describe, expect, it } from "vitest";
import { installUntracedRunTrees } from "../../src/actors/untraced-run-trees.ts";

/** a store as these tests read it (some of RunTree's fields are private in its types) */
interface Tree {
  [key: string]: unknown;
  id: string;
  trace_id: string;
  start_time: number;
  _serialized_start_time: string;
  dotted_order: string;
  child_runs: unknown[];
  extra: Record<string | symbol, unknown>;
}
const CHILD_CONFIG = Symbol.for("lc:child_config");

const storeIn = (config: Record<string, unknown>): Tree =>
  AsyncLocalStorageProviderSingleton.runWithConfig(config, () => AsyncLocalStorageProviderSingleton.getInstance().getStore() as Tree);
const TreeOf = (v: unknown): Tree => v as Tree;

/** RunTree constructions seen since the last call (its constructor asks getDefaultConfig once) */
let constructed = 0;
const statics = RunTree as unknown as { getDefaultConfig(): unknown };
const defaults = statics.getDefaultConfig.bind(RunTree);
statics.getDefaultConfig = () => {
  constructed++;
  return defaults();
};
const takeConstructed = (): number => {
  const n = constructed;
  constructed = 0;
  return n;
};

// LangChain's own tree, before the install (vitest isolates test files: only this file patches)
const theirs = storeIn({ tags: ["before"] });

describe("untraced run trees", () => {
  it("installs once on a LangChain singleton, and refuses what is not one", () => {
    expect(installUntracedRunTrees({})).toBe(false);
    expect(installUntracedRunTrees(undefined)).toBe(false);
    const before = AsyncLocalStorageProviderSingleton.runWithConfig;
    takeConstructed();
    for (let i = 0; i < 10; i++) storeIn({});
    expect(takeConstructed()).toBe(10); // LangChain: a new RunTree per call
    expect(installUntracedRunTrees(AsyncLocalStorageProviderSingleton)).toBe(true);
    expect(takeConstructed()).toBe(1); // the template
    for (let i = 0; i < 10; i++) storeIn({});
    expect(takeConstructed()).toBe(0);
    const patched = AsyncLocalStorageProviderSingleton.runWithConfig;
    expect(patched).not.toBe(before);
    expect(installUntracedRunTrees(AsyncLocalStorageProviderSingleton)).toBe(true);
    expect(AsyncLocalStorageProviderSingleton.runWithConfig).toBe(patched);
  });

  it("stores a RunTree with LangChain's fields and values, the call's config, and its own time and ids", () => {
    installUntracedRunTrees(AsyncLocalStorageProviderSingleton);
    const config = { tags: ["x"], configurable: { thread_id: "t" } };
    const t0 = Date.now();
    const ours = storeIn(config);
    expect(ours).toBeInstanceOf(RunTree);
    expect(isRunTree(ours)).toBe(true);
    expect(Object.keys(ours).sort()).toEqual(Object.keys(theirs).sort());
    const renewed = new Set([
      "id",
      "trace_id",
      "start_time",
      "_serialized_start_time",
      "dotted_order",
      "child_runs",
      "serialized",
      "inputs",
      "caller_options",
      "extra",
    ]);
    for (const key of Object.keys(theirs)) if (!renewed.has(key)) expect(ours[key], key).toEqual(theirs[key]);
    expect(ours.client).toBe(theirs.client);
    expect(ours.tracingEnabled).toBe(false);
    expect(ours.extra[CHILD_CONFIG]).toBe(config);
    expect(ours.extra.metadata).toEqual({});
    expect(ours.start_time).toBeGreaterThanOrEqual(t0);
    // the formats LangSmith's constructor gives: uuid7 of the start time, dotted order, serialized time
    expect(ours.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(parseInt(ours.id.replace(/-/g, "").slice(0, 12), 16)).toBe(ours.start_time);
    expect(ours.trace_id).toBe(ours.id);
    expect(ours._serialized_start_time).toBe(`${new Date(ours.start_time).toISOString().slice(0, -1)}001Z`);
    expect(ours.dotted_order).toBe(`${ours._serialized_start_time.replace(/[-:.]/g, "")}${ours.id}`);
    expect(theirs.dotted_order).toBe(`${theirs._serialized_start_time.replace(/[-:.]/g, "")}${theirs.id}`);
  });

  it("gives every call its own ids and mutable parts", () => {
    installUntracedRunTrees(AsyncLocalStorageProviderSingleton);
    const trees = Array.from({ length: 500 }, () => storeIn({}));
    expect(new Set(trees.map((t) => t.id)).size).toBe(500);
    for (const part of ["child_runs", "serialized", "inputs", "caller_options", "extra"] as const) {
      expect(new Set(trees.map((t) => t[part])).size, part).toBe(500);
    }
    trees[0].child_runs.push(trees[1]);
    expect(trees[2].child_runs).toEqual([]);
    expect(storeIn({}).child_runs).toEqual([]);
  });

  it("answers getRunnableConfig with the innermost call's config, and carries context variables inward", async () => {
    installUntracedRunTrees(AsyncLocalStorageProviderSingleton);
    const outer = { tags: ["outer"] };
    const inner = { tags: ["inner"] };
    const seen = await AsyncLocalStorageProviderSingleton.runWithConfig(outer, async () => {
      setContextVariable("answer", 42);
      const nested = await AsyncLocalStorageProviderSingleton.runWithConfig(inner, async () => {
        await new Promise((r) => setTimeout(r, 1));
        return { config: AsyncLocalStorageProviderSingleton.getRunnableConfig(), answer: getContextVariable("answer") };
      });
      return { nested, after: AsyncLocalStorageProviderSingleton.getRunnableConfig() };
    });
    expect(seen.nested.config).toBe(inner);
    expect(seen.nested.answer).toBe(42);
    expect(seen.after).toBe(outer);
  });

  it("leaves calls that ask for no root tree, and calls a tracer takes, to LangChain", () => {
    installUntracedRunTrees(AsyncLocalStorageProviderSingleton);
    const none = AsyncLocalStorageProviderSingleton.runWithConfig({}, () => AsyncLocalStorageProviderSingleton.getInstance().getStore(), true);
    expect(none).toBeUndefined();

    const tracersTree = new RunTree({ name: "traced", tracingEnabled: false });
    class Tracer extends BaseCallbackHandler {
      name = "langchain_tracer";
      getRunTreeWithTracingConfig(): RunTree {
        return tracersTree;
      }
    }
    const callbacks = new CallbackManager("00000000-0000-7000-8000-000000000001");
    callbacks.addHandler(new Tracer());
    const config = { callbacks };
    const store = storeIn(config);
    expect(store).toBe(TreeOf(tracersTree));
    expect(store.extra[CHILD_CONFIG]).toBe(config);
  });
});
