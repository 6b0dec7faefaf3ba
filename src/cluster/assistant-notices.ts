// Assistant writes told to the other nodes of a cluster, on one bus channel: each node's run cache
// (postgres/assistant-cache.ts) drops the entry as the notice arrives. Not what keeps runs from
// using a changed assistant — every run's create checks its cached assistant in its own statement
// (docs/STORAGE.md, "The assistant of a run") — but it spares the other nodes' next run a refused
// create, and its graph a start with the old assistant, outside the notice's short window.
import type { PostgresAssistants } from "../storage/postgres/assistants.ts";
import type { NotifyBus } from "./bus.ts";
import { channelName } from "./bus-envelope.ts";

/** Publishes this node's assistant writes and drops what other nodes wrote; resolves once listening, with the unsubscribe. */
export async function shareAssistantWrites(
  bus: NotifyBus,
  schema: string,
  assistants: PostgresAssistants,
  onError: (err: unknown) => void,
): Promise<() => Promise<void>> {
  const channel = channelName(schema, "assistants", "written");
  const unsubscribe = await bus.subscribe(channel, {
    message: (m) => assistants.forgetForRun(m.body),
    // notices may have been lost (a reconnect, a hole): every entry goes
    gap: () => assistants.forgetForRun(),
  });
  assistants.onWritten = (assistantId) => void bus.publish(channel, assistantId).catch(onError);
  return async () => {
    assistants.onWritten = undefined;
    await unsubscribe();
  };
}
