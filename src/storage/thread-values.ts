// Reading a thread's state values (stored as JSON text apart from the thread record, see
// records.ts) and building the API view of a thread.
import type { Storage } from "./env.ts";
import type { Json, ThreadRecord, ThreadView } from "./records.ts";
import type { ThreadsPort } from "./port.ts";

/**
 * Stores the thread's values as UTF-8 JSON bytes (bridge/json-segments.ts). The DB's "string"
 * encoding keeps UTF-8 bytes, and lmdb-js writes a Uint8Array as it is: a long thread's values
 * never become one JS string on the way (reads still get a string).
 */
export function putThreadValues(storage: Storage, threadId: string, valuesJson: Uint8Array): void {
  storage.threadValues.put(threadId, valuesJson as unknown as string);
}

/** JSON text of the thread's latest state values, undefined when it has none. */
export function threadValuesJson(storage: Storage, threadId: string): string | undefined {
  return storage.threadValues.get(threadId);
}

export function threadValues(storage: Storage, threadId: string): Json | undefined {
  const text = storage.threadValues.get(threadId);
  return text === undefined ? undefined : (JSON.parse(text) as Json);
}

/** The thread as the API returns it (values parsed from their JSON text). */
export async function threadView(threads: Pick<ThreadsPort, "valuesJson">, thread: ThreadRecord): Promise<ThreadView> {
  const text = await threads.valuesJson(thread.thread_id);
  return text === undefined ? thread : { ...thread, values: JSON.parse(text) as Json };
}
