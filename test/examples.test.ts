// Runs every bundled example and test-fixture graph in-process with LangGraph's MemorySaver, so
// a broken example is caught here before it breaks the end-to-end tests that use it.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { AIMessageChunk, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { Command, InMemoryStore, MemorySaver, StateGraph } from "@langchain/langgraph";
import { createReactAgent } from "@langchain/langgraph/prebuilt";
import { tsImport } from "tsx/esm/api";
import { describe, expect, it } from "vitest";
import { graph as agent, getWeather, type ApprovalRequest } from "../examples/agent.ts";
import { graph as echo } from "../examples/echo.ts";
import { graph as slow } from "../examples/slow.ts";
import { FakeChatModel } from "../examples/fake-chat-model.ts";
import { graph as customStream, CUSTOM_CHUNKS } from "./fixtures/graphs/custom_stream.ts";
import { graph as errorGraph } from "./fixtures/graphs/error.ts";
import { graph as factory } from "./fixtures/graphs/factory.ts";
import { graph as interruptSteps } from "./fixtures/graphs/interrupt_steps.ts";
import { graph as storeGraph, COUNTER_NAMESPACE } from "./fixtures/graphs/store_graph.ts";
import { graph as subgraph } from "./fixtures/graphs/subgraph.ts";
import { graph as uncompiled } from "./fixtures/graphs/uncompiled.ts";
import { makeUserProject, REPO_ROOT, USER_GRAPH_ID } from "./fixtures/make-user-project.ts";

// Vitest gives each test file its own module instances, so attaching savers here is local.
for (const g of [agent, echo, slow, errorGraph, interruptSteps, subgraph, customStream, storeGraph]) {
  g.checkpointer = new MemorySaver();
}

let threadCounter = 0;
function thread(configurable: Record<string, unknown> = {}) {
  threadCounter += 1;
  return { configurable: { thread_id: `t-${threadCounter}`, ...configurable } };
}

const human = (content: string) => ({ messages: [new HumanMessage(content)] });
const summary = (messages: BaseMessage[]) => messages.map((m) => [m.getType(), m.content]);
const interruptsOf = (output: object) => (output as { __interrupt__?: { value: unknown }[] }).__interrupt__;
const WEATHER = "It is sunny and 21°C in Paris.";

describe("examples/agent", () => {
  it("calls the tool and answers from its result on a plain run", async () => {
    const out = await agent.invoke(human("What's the weather in Paris?"), thread());
    expect(interruptsOf(out)).toBeUndefined();
    const [, call, result, answer] = out.messages;
    expect((call as AIMessageChunk).tool_calls).toEqual([expect.objectContaining({ name: "get_weather", args: { city: "Paris" } })]);
    expect(ToolMessage.isInstance(result) && result.content).toBe(WEATHER);
    expect(answer.content).toBe(`According to get_weather: ${WEATHER}`);
  });

  it("echoes when no tool applies", async () => {
    const out = await agent.invoke(human("hello there"), thread());
    expect(summary(out.messages)).toEqual([
      ["human", "hello there"],
      ["ai", "You said: hello there"],
    ]);
  });

  it("interrupts before the tool when approval is required, then runs it on approve", async () => {
    const config = thread({ require_approval: true });
    const paused = await agent.invoke(human("weather in Paris"), config);
    const request = interruptsOf(paused)?.[0]?.value as ApprovalRequest;
    expect(request.tool_calls).toEqual([expect.objectContaining({ name: "get_weather", args: { city: "Paris" } })]);
    const state = await agent.getState(config);
    expect(state.next).toEqual(["human_review"]);
    expect(state.values.messages.some((m: BaseMessage) => m.getType() === "tool")).toBe(false);

    const done = await agent.invoke(new Command({ resume: "approve" }), config);
    expect(done.messages.at(-1)?.content).toBe(`According to get_weather: ${WEATHER}`);
    expect((await agent.getState(config)).next).toEqual([]);
  });

  it("skips the tool when the reviewer rejects", async () => {
    const config = thread({ require_approval: true });
    await agent.invoke(human("weather in Paris"), config);
    const done = await agent.invoke(new Command({ resume: { approved: false, message: "not now" } }), config);
    expect(summary(done.messages.slice(2))).toEqual([
      ["tool", "Rejected by reviewer: not now"],
      ["ai", "I did not use get_weather: Rejected by reviewer: not now"],
    ]);
  });

  it("streams tokens with one message id in messages mode", async () => {
    const chunks: AIMessageChunk[] = [];
    const stream = await agent.stream(human("hello there friend"), { ...thread(), streamMode: "messages" });
    for await (const [message, metadata] of stream) {
      expect(metadata.langgraph_node).toBe("agent");
      chunks.push(message as AIMessageChunk);
    }
    expect(chunks.map((c) => c.content)).toEqual(["You ", "said: ", "hello ", "there ", "friend"]);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(chunks[0].id).toMatch(/^run-/);
  });

  it("streams the tool call and the tool result in messages mode", async () => {
    const seen: [string, string][] = [];
    const stream = await agent.stream(human("weather in Paris"), { ...thread(), streamMode: "messages" });
    for await (const [message, metadata] of stream) seen.push([metadata.langgraph_node, message.getType()]);
    expect(seen[0]).toEqual(["agent", "ai"]);
    expect(seen).toContainEqual(["tools", "tool"]);
    expect(seen.at(-1)).toEqual(["agent", "ai"]);
  });

  it("honours configurable.token_delay_ms", async () => {
    const started = Date.now();
    await agent.invoke(human("a b c d e"), thread({ token_delay_ms: 30 }));
    expect(Date.now() - started).toBeGreaterThanOrEqual(7 * 30 - 10); // "You said: a b c d e" = 7 tokens
  });
});

describe("examples/fake-chat-model", () => {
  it("is deterministic and binds tools given as plain definitions", async () => {
    const model = new FakeChatModel().bindTools([
      { type: "function", function: { name: "calculate", parameters: { type: "object", properties: { expression: {} } } } },
    ]);
    const first = await model.invoke([new HumanMessage("please calculate 2+2")]);
    const second = await model.invoke([new HumanMessage("please calculate 2+2")]);
    expect(first.tool_calls).toEqual([{ type: "tool_call", name: "calculate", args: { expression: "please calculate 2+2" }, id: first.tool_calls?.[0]?.id }]);
    expect(second.tool_calls?.[0]?.id).toBe(first.tool_calls?.[0]?.id);
    expect((await new FakeChatModel().invoke("calculate 1")).content).toBe("You said: calculate 1");
  });

  it("drives LangGraph's prebuilt createReactAgent", async () => {
    const react = createReactAgent({ llm: new FakeChatModel(), tools: [getWeather] });
    const out = await react.invoke(human("weather for Paris"));
    expect(summary(out.messages).slice(2)).toEqual([
      ["tool", WEATHER],
      ["ai", `According to get_weather: ${WEATHER}`],
    ]);
  });
});

describe("examples/echo and examples/slow", () => {
  it("echo appends the last message's content", async () => {
    const out = await echo.invoke(human("ping"), thread());
    expect(summary(out.messages)).toEqual([
      ["human", "ping"],
      ["ai", "ping"],
    ]);
  });

  it("slow sleeps configurable.sleep_ms before echoing", async () => {
    const started = Date.now();
    const out = await slow.invoke(human("zzz"), thread({ sleep_ms: 120 }));
    expect(Date.now() - started).toBeGreaterThanOrEqual(110);
    expect(out.messages.at(-1)?.content).toBe("zzz");
  });

  it("slow stops sleeping when the run is aborted", async () => {
    const controller = new AbortController();
    const started = Date.now();
    setTimeout(() => controller.abort(new Error("cancelled by test")), 30);
    await expect(slow.invoke(human("zzz"), { ...thread({ sleep_ms: 5_000 }), signal: controller.signal })).rejects.toThrow("cancelled by test");
    expect(Date.now() - started).toBeLessThan(1_000);
  });
});

describe("test fixture graphs", () => {
  it("error throws CustomError: Boo!", async () => {
    const failure = await errorGraph.invoke(human("x"), thread()).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(Error);
    expect((failure as Error).name).toBe("CustomError");
    expect((failure as Error).message).toBe("Boo!");
  });

  it("subgraph streams child updates under a namespace", async () => {
    const namespaces: string[] = [];
    const stream = await subgraph.stream(human("start"), { ...thread(), streamMode: "updates", subgraphs: true });
    for await (const [namespace, update] of stream) namespaces.push(`${namespace.join("|")}>${Object.keys(update).join(",")}`);
    expect(namespaces.map((n) => n.replace(/:[^|>]+/g, ""))).toEqual([">parent_one", "child>child_one", "child>child_two", ">child", ">parent_two"]);
    const subgraphNames: string[] = [];
    for await (const [name] of subgraph.getSubgraphsAsync()) subgraphNames.push(name);
    expect(subgraphNames).toEqual(["child"]);
  });

  it("subgraph can pause inside the child and shows it with subgraphs=true", async () => {
    const config = thread({ interrupt_in_subgraph: true });
    await subgraph.invoke(human("start"), config);
    const state = await subgraph.getState(config, { subgraphs: true });
    expect(state.next).toEqual(["child"]);
    const childState = state.tasks[0]?.state;
    expect(childState !== undefined && "next" in childState ? childState.next : undefined).toEqual(["child_two"]);
    const done = await subgraph.invoke(new Command({ resume: "yes" }), config);
    expect(done.messages.map((m) => m.content)).toEqual(["start", "parent_one", "child_one", "child_two:yes", "parent_two"]);
  });

  it("interrupt_steps stops before a node, resumes, and keeps history", async () => {
    const config = thread();
    const paused = await interruptSteps.invoke({ messages: ["start"] }, { ...config, interruptBefore: ["two"] });
    expect(paused.messages).toEqual(["start", "one"]);
    expect((await interruptSteps.getState(config)).next).toEqual(["two"]);
    const done = await interruptSteps.invoke(null, config);
    expect(done.messages).toEqual(["start", "one", "two", "three"]);
    let checkpoints = 0;
    for await (const _ of interruptSteps.getStateHistory(config)) checkpoints += 1;
    expect(checkpoints).toBe(5); // input, one, two, three + the initial empty checkpoint
  });

  it("interrupt_steps waits configurable.delay_ms in each node", async () => {
    const started = Date.now();
    await interruptSteps.invoke({ messages: [] }, thread({ delay_ms: 40 }));
    expect(Date.now() - started).toBeGreaterThanOrEqual(3 * 40 - 10);
  });

  it("factory builds a graph from the config it is given", async () => {
    const built = await factory({ configurable: { factory_prefix: "hey" } });
    expect((await built.invoke(human("you"))).messages.at(-1)?.content).toBe("hey: you");
    expect((await (await factory({})).invoke(human("you"))).messages.at(-1)?.content).toBe("factory: you");
  });

  it("uncompiled is a StateGraph that compiles and runs", async () => {
    expect(uncompiled).toBeInstanceOf(StateGraph);
    const compiled = uncompiled.compile({ checkpointer: new MemorySaver() });
    expect(summary((await compiled.invoke(human("u"), thread())).messages)).toEqual([
      ["human", "u"],
      ["ai", "u"],
    ]);
  });

  it("custom_stream writes its custom chunks", async () => {
    const chunks: unknown[] = [];
    for await (const chunk of await customStream.stream(human("go"), { ...thread(), streamMode: "custom" })) chunks.push(chunk);
    expect(chunks).toEqual(CUSTOM_CHUNKS);
  });

  it("store_graph counts runs per thread in the store", async () => {
    const store = new InMemoryStore();
    storeGraph.store = store;
    const config = thread();
    expect((await storeGraph.invoke({}, config)).count).toBe(1);
    expect((await storeGraph.invoke({}, config)).count).toBe(2);
    expect((await storeGraph.invoke({}, thread())).count).toBe(1);
    expect((await store.get(COUNTER_NAMESPACE, config.configurable.thread_id))?.value).toEqual({ count: 2 });
  });
});

describe("service.json files", () => {
  const configs = {
    "examples/service.json": ["agent", "echo", "slow"],
    "test/fixtures/graphs/service.json": [
      "agent",
      "echo",
      "slow",
      "error",
      "subgraph",
      "interrupt_steps",
      "factory",
      "uncompiled",
      "custom_stream",
      "store_graph",
      "context",
    ],
  };
  for (const [file, ids] of Object.entries(configs)) {
    it(`${file} declares graphs whose files and exports exist`, async () => {
      const configPath = path.join(REPO_ROOT, file);
      const service = JSON.parse(fs.readFileSync(configPath, "utf8")) as { graphs: Record<string, string> };
      expect(Object.keys(service.graphs).sort()).toEqual([...ids].sort());
      for (const spec of Object.values(service.graphs)) {
        const [relative, exportName] = spec.split(":");
        const module = (await import(path.resolve(path.dirname(configPath), relative))) as Record<string, unknown>;
        expect(module[exportName], spec).toBeDefined();
      }
    });
  }
});

describe("user project fixture", () => {
  it("loads and runs its graph with its own copy of LangGraph", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "troupe-user-project-"));
    try {
      const servicePath = await makeUserProject(dir);
      const service = JSON.parse(fs.readFileSync(servicePath, "utf8")) as { graphs: Record<string, string> };
      const [relative, exportName] = service.graphs[USER_GRAPH_ID].split(":");
      expect(fs.lstatSync(path.join(dir, "node_modules/@langchain/langgraph")).isSymbolicLink()).toBe(false);
      // One import brings in the user's graph and a MemorySaver from the same copy.
      const probe = path.join(dir, "probe.ts");
      fs.writeFileSync(probe, `export * as user from "./${relative}";\nexport { MemorySaver } from "@langchain/langgraph";\n`);

      const imported: string[] = [];
      const probeModule = (await tsImport(probe, {
        parentURL: pathToFileURL(probe).href,
        onImport: (url) => imported.push(url),
      })) as { user: Record<string, unknown>; MemorySaver: typeof MemorySaver };
      const ownCopy = pathToFileURL(path.join(dir, "node_modules/@langchain/langgraph/")).href;
      const repoModules = pathToFileURL(path.join(REPO_ROOT, "node_modules/")).href;
      expect(imported.some((url) => url.startsWith(ownCopy))).toBe(true);
      expect(imported.filter((url) => url.startsWith(repoModules))).toEqual([]);

      const userGraph = probeModule.user[exportName] as typeof echo;
      expect(userGraph).not.toBeInstanceOf(Object.getPrototypeOf(echo).constructor);
      expect(probeModule.MemorySaver).not.toBe(MemorySaver);
      userGraph.checkpointer = new probeModule.MemorySaver();
      const config = thread();
      const out = await userGraph.invoke({ messages: [{ role: "user", content: "hi" }] }, config);
      expect(summary(out.messages)).toEqual([
        ["human", "hi"],
        ["ai", "user project: hi"],
      ]);
      expect((await userGraph.getState(config)).values.messages).toHaveLength(2);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
