// The benchmark graph ("echo"): one node that answers with the last message's content.
// Kept as cheap as a graph can be so benchmarks measure the platform, not the graph.
import { AIMessage } from "@langchain/core/messages";
import { END, START, MessagesAnnotation, StateGraph } from "@langchain/langgraph";

type State = typeof MessagesAnnotation.State;

function echo(state: State): Partial<State> {
  const last = state.messages.at(-1);
  return { messages: [new AIMessage({ content: last?.content ?? "" })] };
}

export const graph = new StateGraph(MessagesAnnotation).addNode("echo", echo).addEdge(START, "echo").addEdge("echo", END).compile({ name: "echo" });
