// Piscina task entry for an actor worker (compiled by the main thread, src/loader/, together with
// everything it imports from src/; user graph files are compiled too): one long-lived task per worker hosts one shard.
import { isMainThread } from "node:worker_threads";
import { runShardHost } from "../src/actors/shard-host.ts";
import type { ShardTask } from "../src/bridge/messages.ts";
import { installBufferedRandomValues } from "../src/util/buffered-random.ts";

if (isMainThread) throw new Error("workers/actor-shard.ts is a worker entry point; it must not be loaded on the main thread");

installBufferedRandomValues(); // before any graph module loads: LangChain draws a uuid per runnable call

export default function actorShard(task: ShardTask): Promise<string> {
  return runShardHost(task, { createStore: (storage) => storage.store.open({ ttl: task.storeTtl, index: task.storeIndex }) });
}
