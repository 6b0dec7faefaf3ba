// SendMessage / message/send (and the streaming variants): an A2A message becomes a run on the
// context's thread (created if missing). A message naming a task waiting for input resumes it.
import { matchesAuthFilter } from "../../auth/index.ts";
import type { AuthInfo } from "../../http/types.ts";
import type { AppContext } from "../../server/context.ts";
import type { AssistantRecord, JsonObject, RunRecord } from "../../storage/records.ts";
import { canonicalUuidOf, uuid7 } from "../../util/ids.ts";
import { buildCreateRun, createBuiltRun, type RunCreateBody } from "../run-request.ts";
import { A2A_ERRORS, TERMINAL_STATES } from "./dialects.ts";
import { hasMessageContent, readMessage, resumeValue, toGraphInput } from "./messages.ts";
import { loadTask, taskState } from "./task.ts";
import { acceptsMessages, type InputSchemas } from "../graph-input-schema.ts";
import { isRecord, RPC, RpcError, toRpcError, type RpcParams } from "../jsonrpc.ts";

export const taskNotFound = (id: string) => new RpcError(A2A_ERRORS.TASK_NOT_FOUND, `Task not found: ${id}`);

export async function createTaskRun(
  app: AppContext,
  schemas: InputSchemas,
  assistant: AssistantRecord,
  params: RpcParams,
  headers: Record<string, string>,
  stream: boolean,
  auth: AuthInfo | undefined,
): Promise<RunRecord> {
  const msg = readMessage(params.message);
  const givenContext = msg.contextId ?? params.contextId;
  const contextId = canonicalUuidOf(givenContext);
  if (givenContext !== undefined && givenContext !== null && contextId === undefined) {
    throw new RpcError(RPC.INVALID_PARAMS, "Failed to create run: Invalid thread ID");
  }
  let threadId = contextId ?? uuid7();
  let resume = false;
  if (msg.taskId !== undefined && msg.taskId !== null) {
    const taskId = String(msg.taskId);
    const prev = await loadTask(app.storage, taskId);
    if (!prev || prev.run.assistant_id !== assistant.assistant_id || (contextId !== undefined && prev.run.thread_id !== contextId)) throw taskNotFound(taskId);
    if (app.auth && auth) {
      // continuing a task reads and runs on its thread: another user's task is not found
      const filter = await app.auth.authorize(auth, "threads:read", { thread_id: prev.run.thread_id, run_id: prev.run.run_id });
      if (!matchesAuthFilter(filter, (await app.storage.threads.get(prev.run.thread_id))?.metadata)) throw taskNotFound(taskId);
    }
    const state = taskState(prev);
    if (TERMINAL_STATES.has(state)) {
      throw new RpcError(
        A2A_ERRORS.UNSUPPORTED_OPERATION,
        `Task ${taskId} is already ${state}: send the next message without taskId to start a new task in the same context`,
      );
    }
    threadId = prev.run.thread_id;
    resume = state === "input-required";
  }
  const command = isRecord(params.command) ? (params.command as JsonObject) : resume ? { resume: resumeValue(msg) } : undefined;
  if (!command && hasMessageContent(msg) && !acceptsMessages(await schemas.of(assistant))) {
    throw new RpcError(
      RPC.INVALID_PARAMS,
      `Assistant ${assistant.assistant_id} does not accept messages (its input schema has no "messages" key): send a data part instead`,
    );
  }
  const body: RunCreateBody = {
    assistant_id: assistant.assistant_id,
    if_not_exists: "create",
    stream_mode: stream ? ["messages-tuple", "values"] : ["values"],
    ...(command ? { command } : { input: toGraphInput(msg) }),
    ...(params.context !== undefined && params.context !== null ? { context: params.context as JsonObject } : {}),
  };
  try {
    const runId = uuid7();
    return await createBuiltRun(app, async (freshAssistant) => {
      const cmd = await buildCreateRun(app, body, headers, { threadId, runId, stateless: false, observed: stream, auth, freshAssistant });
      // threads:create_run: another user's context (thread) is "not found", as on /threads/{id}/runs
      await app.auth?.authorizeRun(auth, cmd, (tid) => app.storage.threads.get(tid));
      return cmd;
    });
  } catch (err) {
    const e = toRpcError(err, "Failed to create run: ");
    throw new RpcError(e.code, e.message);
  }
}
