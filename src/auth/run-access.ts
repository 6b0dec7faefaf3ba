// Run creation under custom auth (reference §11.2 `threads:create_run`, §6.3): the handler sees
// the run about to be created and may change its metadata; an existing thread the filter does
// not allow answers 404, and so does an assistant the caller cannot read (Troupe: upstream runs
// any assistant it is given). Also the auth user fields every authenticated run gets in `configurable`.
import type { CreateRunCommand } from "../bridge/messages.ts";
import { assistantNotFound, threadNotFound } from "../errors.ts";
import type { AuthInfo } from "../http/types.ts";
import type { AssistantRecord, Json, JsonObject, ThreadRecord } from "../storage/records.ts";
import { defaultAssistantId } from "../util/ids.ts";
import { asMetadata, matchesAuthFilter } from "./filter.ts";
import type { AuthRuntime } from "./runtime.ts";
import { userOf } from "./user.ts";

export async function authorizeRunCreate(
  runtime: AuthRuntime,
  info: AuthInfo | undefined,
  cmd: CreateRunCommand,
  threadOf: (threadId: string) => Promise<ThreadRecord | undefined>,
): Promise<void> {
  if (!info) return;
  await authorizeAssistantUse(runtime, info, cmd.assistant);
  const value = {
    thread_id: cmd.stateless ? undefined : cmd.threadId,
    assistant_id: cmd.assistant.assistant_id,
    run_id: cmd.runId,
    status: "pending",
    metadata: cmd.metadata,
    prevent_insert_if_inflight: cmd.multitaskStrategy === "reject",
    multitask_strategy: cmd.multitaskStrategy,
    if_not_exists: cmd.ifNotExists,
    after_seconds: cmd.afterSeconds,
    kwargs: cmd.kwargs,
  };
  const filter = await runtime.authorize(info, "threads:create_run", value);
  cmd.metadata = asMetadata(value.metadata);
  if (!filter || cmd.stateless) return;
  const thread = await threadOf(cmd.threadId);
  if (thread && !matchesAuthFilter(filter, thread.metadata)) throw threadNotFound(cmd.threadId);
}

/**
 * An assistant a request runs (runs, crons, A2A, MCP): `assistants:read` is fired for it and its
 * filter must match the assistant's metadata, else 404 as for a missing one — so nobody runs (and
 * copies the config of) an assistant they cannot read. The server's own default assistant of a
 * graph (one per graph, made from the config, owned by nobody) is usable by every caller, as
 * upstream; `threads:create_run` (its value names the assistant) can restrict it.
 */
export async function authorizeAssistantUse(runtime: AuthRuntime, info: AuthInfo | undefined, assistant: AssistantRecord): Promise<void> {
  if (!info || isServerDefault(assistant)) return;
  const filter = await runtime.authorize(info, "assistants:read", { assistant_id: assistant.assistant_id });
  if (!matchesAuthFilter(filter, assistant.metadata)) throw assistantNotFound();
}

/** The assistant the server made for a graph at startup (its id derives from the graph id). */
export const isServerDefault = (a: AssistantRecord): boolean => a.assistant_id === defaultAssistantId(a.graph_id) && a.metadata.created_by === "system";

/**
 * `langgraph_auth_user`, `langgraph_auth_user_id`, `langgraph_auth_permissions` into a run's
 * configurable, plus `user_id` = identity unless the run, thread or assistant config sets one.
 */
export function addAuthUserFields(configurable: JsonObject, info: AuthInfo, userIdTaken: boolean): void {
  const user = userOf(info);
  configurable.langgraph_auth_user = toJson(user);
  configurable.langgraph_auth_user_id = user.identity;
  configurable.langgraph_auth_permissions = [...user.permissions];
  if (!userIdTaken && configurable.user_id === undefined) configurable.user_id = user.identity;
}

/** The user object may hold anything its author returned; runs need plain JSON. */
function toJson(user: ReturnType<typeof userOf>): JsonObject {
  try {
    const out = JSON.parse(JSON.stringify(user) ?? "{}") as Json;
    if (typeof out === "object" && out !== null && !Array.isArray(out)) return out;
  } catch {
    // circular or BigInt fields: keep the fields every user has
  }
  return { identity: user.identity, permissions: [...user.permissions], is_authenticated: user.is_authenticated, display_name: user.display_name };
}
