// JSON Schemas of the thread-centric protocol (docs/THREAD_PROTOCOL.md): the command envelope,
// each command's params, and the event filter shared by SSE stream requests and WebSocket
// subscriptions. Validated with the same ajv setup as every request body.
import type { JsonSchema } from "../../http/schema-types.ts";
import { arrayOf, body, integer, MAX_KEY_CHARS, object, strings, text } from "../../http/schemas/common.ts";

const CHANNEL_PATTERN = "^(values|updates|messages|tools|lifecycle|input|checkpoints|tasks|custom)$|^custom:.+$";
const optionalObject: JsonSchema = { type: ["object", "null"] };

/** What a stream or subscription receives: channels, namespace prefixes, depth below them. */
const filterProperties = {
  channels: arrayOf(text({ pattern: CHANNEL_PATTERN }), { minItems: 1 }),
  namespaces: arrayOf(strings),
  depth: integer({ minimum: 0 }),
};

/** Body of POST /threads/{t}/stream/events (strict, as the reference says). */
export const eventStreamRequestSchema = body({ ...filterProperties, since: integer({ minimum: 0 }) }, ["channels"], { additionalProperties: false });

/** Body of POST /threads/{t}/commands, and every WebSocket text frame. */
export const commandSchema = body({ id: integer({ minimum: 0 }), method: text({ minLength: 1 }), params: object }, ["id", "method"]);

const runOptions: Record<string, JsonSchema> = {
  config: optionalObject,
  metadata: optionalObject,
  multitask_strategy: { enum: ["reject", "interrupt", "rollback", "enqueue", null] },
  multitaskStrategy: { enum: ["reject", "interrupt", "rollback", "enqueue", null] },
  langsmith_tracer: optionalObject,
};
const interruptResponse: JsonSchema = {
  type: "object",
  properties: { interrupt_id: { type: "string", minLength: 1 }, response: {}, namespace: strings },
  required: ["interrupt_id"],
};

/** params of each command (extra keys are allowed: the protocol's types are extensible). */
export const COMMAND_PARAMS: Record<string, JsonSchema> = {
  "run.start": {
    type: "object",
    properties: { assistant_id: { type: "string", minLength: 1, maxLength: MAX_KEY_CHARS }, input: {}, ...runOptions },
    required: ["assistant_id"],
  },
  "input.respond": {
    type: "object",
    properties: {
      interrupt_id: { type: "string", minLength: 1 },
      response: {},
      namespace: strings,
      responses: { type: "array", items: interruptResponse, minItems: 1 },
      update: {},
      goto: {},
      strict_resume: { type: "boolean" },
      ...runOptions,
    },
  },
  "state.get": { type: "object", properties: { namespace: strings, keys: strings } },
  "state.listCheckpoints": {
    type: "object",
    properties: { namespace: strings, limit: { type: "integer", minimum: 1 }, before: { type: "string", maxLength: 64 } },
  },
  "state.fork": {
    type: "object",
    properties: { checkpoint_id: { type: "string", minLength: 1, maxLength: 64 }, input: {}, ...runOptions },
    required: ["checkpoint_id"],
  },
  "agent.getTree": { type: "object", properties: { run_id: { type: "string", maxLength: 64 } } },
  "subscription.subscribe": { type: "object", properties: filterProperties, required: ["channels"] },
  "subscription.unsubscribe": { type: "object", properties: { subscription_id: { type: "string" } }, required: ["subscription_id"] },
};
