// Run creation under custom auth (reference §11.2 `threads:create_run`, §6.3): the handler sees
// the run about to be created and may change its metadata; an existing thread the filter does
// not allow answers 404. Also the auth user fields every authenticated run gets in `configurable`.
import type { CreateRunCommand } from "../bridge/messages.ts";
import { threadNotFound } from "../errors.ts";
import type { AuthInfo } from "../http/types.ts";
import type { Json, JsonObject, ThreadRecord } from "../storage/records.ts";
import { asMetadata, matchesAuthFilter } from "./filter.ts";
import type { AuthRuntime } from "./runtime.ts";
import { userOf } from "./user.ts";

export async function authorizeRunCreate(
  runtime: AuthRuntime,
  info: AuthInfo | undefined,
  cmd: CreateRunCommand,
  threadOf: (threadId: string) => ThreadRecord | undefined,
): Promise<void> {
  if (!info) return;
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
  const thread = threadOf(cmd.threadId);
  if (thread && !matchesAuthFilter(filter, thread.metadata)) throw threadNotFound(cmd.threadId);
}

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
