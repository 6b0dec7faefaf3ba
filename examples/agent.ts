// The bundled example agent: a tool-calling loop with optional human approval, built from
// LangGraph prebuilt pieces and a fake model, so it streams, calls a tool and interrupts offline.
//
//   START → agent ─┬─ no tool call ─────────────────────────────→ END
//                  ├─ tool call, approval off ─→ tools → agent
//                  └─ tool call, approval on ──→ human_review ─┬─ approved → tools → agent
//                                                              └─ rejected → agent
//
// Configurable keys (all optional):
//   require_approval: boolean  (default false) — when true, `human_review` calls
//       `interrupt({question, tool_calls})` before the tool runs.
//   token_delay_ms: number     (default 0) — per-token delay of the fake model.
// Resuming the interrupt (`new Command({ resume: VALUE })`):
//   approve: "approve", true, or { approved: true }             → the tool runs.
//   reject:  any other value, e.g. "too expensive" or { approved: false, message: "no" }
//            → the tool is skipped; a ToolMessage (status "error") with content
//              "Rejected by reviewer: <message>" is added and the agent answers
//              "I did not use get_weather: Rejected by reviewer: <message>".
// Ask "What's the weather in Paris?" to trigger the tool; anything else gets "You said: …".
import { tool } from "@langchain/core/tools";
import { ToolMessage, type AIMessage } from "@langchain/core/messages";
import type { ToolCall } from "@langchain/core/messages/tool";
import { END, START, MessagesAnnotation, StateGraph, interrupt, type LangGraphRunnableConfig } from "@langchain/langgraph";
import { ToolNode, toolsCondition } from "@langchain/langgraph/prebuilt";
import { z } from "zod";
import { FakeChatModel } from "./fake-chat-model.ts";

export const getWeather = tool(async ({ city }: { city: string }) => `It is sunny and 21°C in ${city}.`, {
  name: "get_weather",
  description: "Current weather for a city (fixed answer, for demos).",
  schema: z.object({ city: z.string().describe("City name, e.g. Paris") }),
});

const model = new FakeChatModel().bindTools([getWeather]);

/** What `human_review` sends to the client in the interrupt. */
export interface ApprovalRequest {
  question: string;
  tool_calls: { id: string | undefined; name: string; args: Record<string, unknown> }[];
}

type State = typeof MessagesAnnotation.State;

async function callModel(state: State, config: LangGraphRunnableConfig): Promise<Partial<State>> {
  const response = await model.invoke(state.messages, config);
  return { messages: [response] };
}

function routeAfterAgent(state: State, config: LangGraphRunnableConfig): "tools" | "human_review" | typeof END {
  if (toolsCondition(state) === END) return END;
  return config.configurable?.require_approval === true ? "human_review" : "tools";
}

function humanReview(state: State): Partial<State> {
  const toolCalls = pendingToolCalls(state);
  const request: ApprovalRequest = {
    question: "Approve these tool calls?",
    tool_calls: toolCalls.map((call) => ({ id: call.id, name: call.name, args: call.args })),
  };
  const decision: unknown = interrupt(request);
  if (isApproval(decision)) return {};
  const message = `Rejected by reviewer: ${rejectionReason(decision)}`;
  return {
    messages: toolCalls.map((call) => new ToolMessage({ tool_call_id: call.id ?? "", name: call.name, status: "error", content: message })),
  };
}

function routeAfterReview(state: State): "tools" | "agent" {
  const last = state.messages.at(-1);
  return last !== undefined && ToolMessage.isInstance(last) ? "agent" : "tools";
}

function pendingToolCalls(state: State): ToolCall[] {
  const last = state.messages.at(-1) as AIMessage | undefined;
  return last?.tool_calls ?? [];
}

function isApproval(decision: unknown): boolean {
  if (decision === "approve" || decision === true) return true;
  return typeof decision === "object" && decision !== null && (decision as { approved?: unknown }).approved === true;
}

function rejectionReason(decision: unknown): string {
  if (typeof decision === "string" && decision !== "") return decision;
  if (typeof decision === "object" && decision !== null) {
    const { message, reason } = decision as { message?: unknown; reason?: unknown };
    if (typeof message === "string") return message;
    if (typeof reason === "string") return reason;
  }
  return "no reason given";
}

export const graph = new StateGraph(MessagesAnnotation)
  .addNode("agent", callModel)
  .addNode("human_review", humanReview)
  .addNode("tools", new ToolNode([getWeather]))
  .addEdge(START, "agent")
  .addConditionalEdges("agent", routeAfterAgent, ["tools", "human_review", END])
  .addConditionalEdges("human_review", routeAfterReview, ["tools", "agent"])
  .addEdge("tools", "agent")
  .compile({ name: "agent" });
