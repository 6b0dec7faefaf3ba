// A2A agent card of one assistant (reference §4.1): identity, endpoint URL, capabilities and
// one skill describing the graph's input. Cards carry both the 0.3 fields and the 1.0
// `supportedInterfaces` declaration.
import type { AssistantRecord, JsonObject } from "../../storage/records.ts";
import { isRecord } from "../jsonrpc.ts";

const DEFAULT_MODES = ["application/json", "text/plain"];

export interface CardInput {
  assistant: AssistantRecord;
  graphDescription: string | null;
  inputSchema: JsonObject | null;
  baseUrl: string;
  version: string;
}

/** Base URL of this server as the client reached it (Host header, X-Forwarded-Proto/-Host honoured). */
export function baseUrlOf(headers: Record<string, string>): string {
  const proto = (headers["x-forwarded-proto"] ?? "http").split(",")[0].trim() || "http";
  const host = (headers["x-forwarded-host"] ?? headers.host ?? "localhost").split(",")[0].trim();
  return `${proto}://${host}`;
}

function modes(assistant: AssistantRecord, key: "input_modes" | "output_modes"): string[] {
  const a2a = assistant.metadata.a2a;
  const v = isRecord(a2a) ? a2a[key] : undefined;
  return Array.isArray(v) && v.every((x) => typeof x === "string") ? (v as string[]) : DEFAULT_MODES;
}

export function agentCard(c: CardInput): JsonObject {
  const a = c.assistant;
  const url = `${c.baseUrl}/a2a/${a.assistant_id}`;
  const description = a.description ?? c.graphDescription ?? `${a.name} assistant`;
  const inputModes = modes(a, "input_modes");
  const outputModes = modes(a, "output_modes");
  const props = isRecord(c.inputSchema?.properties) ? Object.keys(c.inputSchema.properties) : [];
  const required = Array.isArray(c.inputSchema?.required) ? c.inputSchema.required : [];
  return {
    protocolVersion: "0.3.0",
    name: a.name,
    description,
    url,
    preferredTransport: "JSONRPC",
    supportedInterfaces: [{ url, protocolBinding: "JSONRPC", protocolVersion: "1.0" }],
    version: c.version,
    capabilities: { streaming: true, pushNotifications: false, stateTransitionHistory: false },
    defaultInputModes: inputModes,
    defaultOutputModes: outputModes,
    skills: [
      {
        id: `${a.assistant_id}-main`,
        name: `${a.name} Capabilities`,
        description,
        tags: ["assistant", "langgraph"],
        examples: [],
        inputModes,
        outputModes,
        metadata: {
          assistant_id: a.assistant_id,
          graph_id: a.graph_id,
          inputSchema: { required, properties: props, supportsA2A: props.length === 0 || props.includes("messages") },
        },
      },
    ],
    supportsAuthenticatedExtendedCard: false,
  };
}
