// A deterministic, network-free chat model so the bundled examples and the tests can stream
// tokens and call tools without an API key. Same conversation in → same reply out.
//
// How it decides (looking at the conversation it is given):
//   1. Last message is a ToolMessage → it summarises that result:
//        "According to <tool name>: <tool result>"           (tool ran)
//        "I did not use <tool name>: <tool result>"           (ToolMessage with status "error",
//                                                              e.g. a human rejected the call)
//   2. Otherwise, if a bound tool's keyword appears in the last human message, it answers with
//      ONE tool call and no text. A tool's keyword is the last `_`-separated part of its name
//      (`get_weather` → "weather", `calculate` → "calculate"), matched case-insensitively as a
//      word. The call's arguments fill the tool's first schema property with the subject: the
//      words after the last " in " / " for " / " of " (trailing punctuation dropped), or the
//      whole message if there is none. "What's the weather in Paris?" → get_weather({city:"Paris"}).
//   3. Otherwise it echoes: "You said: <last human message text>" ("You said: " alone if no
//      human message).
// Replies stream word by word ("You ", "said: ", "hi"), all chunks of one reply sharing one
// message id (`run-<callback run id>`, or `fake-<hash>` outside callbacks). Tool call ids are
// `call_<hash of the conversation>`, so they are stable across runs and distinct within a thread.
// Per-token delay: `configurable.token_delay_ms` of the surrounding run (default: the
// constructor's `tokenDelayMs`, default 0). The delay honours the call's abort signal.
import type { CallbackManagerForLLMRun } from "@langchain/core/callbacks/manager";
import { BaseChatModel, type BaseChatModelCallOptions, type BaseChatModelParams, type BindToolsInput } from "@langchain/core/language_models/chat_models";
import type { BaseLanguageModelInput } from "@langchain/core/language_models/base";
import { AIMessageChunk, type BaseMessage, ToolMessage, type ToolCallChunk } from "@langchain/core/messages";
import { ChatGenerationChunk, type ChatResult } from "@langchain/core/outputs";
import type { Runnable } from "@langchain/core/runnables";
import { AsyncLocalStorageProviderSingleton } from "@langchain/core/singletons";
import { isInteropZodSchema } from "@langchain/core/utils/types";
import { toJsonSchema } from "@langchain/core/utils/json_schema";
import { sleep } from "./sleep.ts";

/** What the fake model needs to know about a bound tool. */
export interface FakeToolSpec {
  name: string;
  /** First property of the tool's argument schema; the subject goes there. */
  firstArg: string | undefined;
}

export interface FakeChatModelCallOptions extends BaseChatModelCallOptions {
  /** Set by `bindTools`. */
  fakeTools?: FakeToolSpec[];
}

export interface FakeChatModelParams extends BaseChatModelParams {
  /** Delay before each streamed token, used when the run has no `configurable.token_delay_ms`. */
  tokenDelayMs?: number;
}

export class FakeChatModel extends BaseChatModel<FakeChatModelCallOptions, AIMessageChunk> {
  readonly tokenDelayMs: number;

  constructor(params: FakeChatModelParams = {}) {
    super(params);
    this.tokenDelayMs = params.tokenDelayMs ?? 0;
  }

  static override lc_name(): string {
    return "FakeChatModel";
  }

  _llmType(): string {
    return "fake-chat";
  }

  override bindTools(
    tools: BindToolsInput[],
    kwargs?: Partial<FakeChatModelCallOptions>,
  ): Runnable<BaseLanguageModelInput, AIMessageChunk, FakeChatModelCallOptions> {
    const fakeTools = [...(kwargs?.fakeTools ?? []), ...tools.map(toFakeToolSpec)];
    return this.withConfig({ ...kwargs, fakeTools });
  }

  async _generate(messages: BaseMessage[], options: this["ParsedCallOptions"], runManager?: CallbackManagerForLLMRun): Promise<ChatResult> {
    let aggregate: ChatGenerationChunk | undefined;
    for await (const chunk of this._streamResponseChunks(messages, options, runManager)) {
      aggregate = aggregate === undefined ? chunk : aggregate.concat(chunk);
    }
    if (aggregate === undefined) throw new Error("FakeChatModel produced no output");
    return { generations: [aggregate] };
  }

  override async *_streamResponseChunks(
    messages: BaseMessage[],
    options: this["ParsedCallOptions"],
    runManager?: CallbackManagerForLLMRun,
  ): AsyncGenerator<ChatGenerationChunk> {
    const id = runManager?.runId !== undefined ? `run-${runManager.runId}` : `fake-${conversationHash(messages)}`;
    const reply = decideReply(messages, options.fakeTools ?? []);
    const delayMs = this.currentTokenDelayMs();

    if (reply.kind === "tool_call") {
      await sleep(delayMs, options.signal);
      const toolCallChunk: ToolCallChunk = {
        type: "tool_call_chunk",
        id: reply.callId,
        name: reply.name,
        args: JSON.stringify(reply.args),
        index: 0,
      };
      const chunk = new ChatGenerationChunk({
        text: "",
        message: new AIMessageChunk({ id, content: "", tool_call_chunks: [toolCallChunk] }),
      });
      yield chunk;
      await runManager?.handleLLMNewToken("", undefined, undefined, undefined, undefined, { chunk });
      return;
    }

    for (const token of tokenize(reply.text)) {
      await sleep(delayMs, options.signal);
      const chunk = new ChatGenerationChunk({
        text: token,
        message: new AIMessageChunk({ id, content: token }),
      });
      yield chunk;
      await runManager?.handleLLMNewToken(token, undefined, undefined, undefined, undefined, { chunk });
    }
  }

  /** `configurable.token_delay_ms` of the run we are called from, if any. */
  private currentTokenDelayMs(): number {
    const config: unknown = AsyncLocalStorageProviderSingleton.getRunnableConfig();
    const value = isRecord(config) && isRecord(config.configurable) ? config.configurable.token_delay_ms : undefined;
    return typeof value === "number" && value >= 0 ? value : this.tokenDelayMs;
  }
}

type Reply = { kind: "text"; text: string } | { kind: "tool_call"; name: string; args: Record<string, string>; callId: string };

/** The three rules from the top of this file. Exported for tests and docs. */
export function decideReply(messages: BaseMessage[], tools: FakeToolSpec[]): Reply {
  const last = messages.at(-1);
  if (last !== undefined && ToolMessage.isInstance(last)) {
    const name = last.name ?? "the tool";
    const result = textOf(last);
    return {
      kind: "text",
      text: last.status === "error" ? `I did not use ${name}: ${result}` : `According to ${name}: ${result}`,
    };
  }
  const human = [...messages].reverse().find((m) => m.getType() === "human");
  const text = human === undefined ? "" : textOf(human);
  for (const tool of tools) {
    const keyword = tool.name.split("_").at(-1) ?? tool.name;
    if (keyword !== "" && new RegExp(`\\b${escapeRegExp(keyword)}\\b`, "i").test(text)) {
      const args: Record<string, string> = tool.firstArg === undefined ? {} : { [tool.firstArg]: subjectOf(text) };
      return { kind: "tool_call", name: tool.name, args, callId: `call_${conversationHash(messages)}` };
    }
  }
  return { kind: "text", text: `You said: ${text}` };
}

function toFakeToolSpec(tool: BindToolsInput): FakeToolSpec {
  const record: Record<string, unknown> = isRecord(tool) ? tool : {};
  // OpenAI-style `{type: "function", function: {name, parameters}}` or a tool / `{name, schema}`.
  const fn = isRecord(record.function) ? record.function : record;
  const name = typeof fn.name === "string" ? fn.name : "tool";
  const rawSchema = fn.parameters ?? fn.schema;
  let schema: unknown = rawSchema;
  if (isInteropZodSchema(rawSchema)) schema = toJsonSchema(rawSchema);
  const properties = isRecord(schema) && isRecord(schema.properties) ? Object.keys(schema.properties) : [];
  return { name, firstArg: properties[0] };
}

function subjectOf(text: string): string {
  const match = /.*\b(?:in|for|of)\s+(.+)$/is.exec(text);
  const subject = (match?.[1] ?? text).replace(/[\s?.!,;:]+$/u, "").trim();
  return subject === "" ? text.trim() : subject;
}

function textOf(message: BaseMessage): string {
  if (typeof message.content === "string") return message.content;
  return message.content.map((part) => (part.type === "text" && typeof part.text === "string" ? part.text : "")).join("");
}

/** Words with their trailing whitespace; concatenating the tokens gives back the text. */
function tokenize(text: string): string[] {
  const tokens = text.match(/\s*\S+\s*/g);
  return tokens === null || tokens.length === 0 ? [text] : tokens;
}

/** FNV-1a over the message types and texts: deterministic, short, good enough for ids. */
function conversationHash(messages: BaseMessage[]): string {
  let hash = 0x811c9dc5;
  const input = messages.map((m) => `${m.getType()}:${textOf(m)}`).join("\u0000") + `#${messages.length}`;
  for (let i = 0; i < input.length; i++) {
    hash ^= input.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash.toString(16).padStart(8, "0");
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
