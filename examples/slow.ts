// Like "echo" but the node first sleeps, for the slow-runs benchmark and cancellation tests.
// Configurable: `sleep_ms` (default 200). The sleep ends early, rejecting with the signal's
// reason, when the run's abort signal fires (LangGraph passes it as `config.signal`).
import { AIMessage } from "@langchain/core/messages";
import { END, START, MessagesAnnotation, StateGraph, type LangGraphRunnableConfig } from "@langchain/langgraph";
import { sleep } from "./sleep.ts";

type State = typeof MessagesAnnotation.State;

export const DEFAULT_SLEEP_MS = 200;

async function slowEcho(state: State, config: LangGraphRunnableConfig): Promise<Partial<State>> {
  const requested: unknown = config.configurable?.sleep_ms;
  const sleepMs = typeof requested === "number" && requested >= 0 ? requested : DEFAULT_SLEEP_MS;
  await sleep(sleepMs, config.signal);
  const last = state.messages.at(-1);
  return { messages: [new AIMessage({ content: last?.content ?? "" })] };
}

export const graph = new StateGraph(MessagesAnnotation).addNode("slow", slowEcho).addEdge(START, "slow").addEdge("slow", END).compile({ name: "slow" });
