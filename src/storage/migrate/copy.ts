// `troupe migrate`: copies a deployment from one backend to the other, family by family
// (assistants, crons, store items, threads with their runs and whole checkpoint history),
// resumably: after each batch commits in the target, the target's progress record says where the
// copy got, and a re-run continues from there. Re-copying a record replaces it, so a batch cut
// short by a crash is simply copied again.
import { WRITES_IDX_MAP, type CheckpointTuple, type PendingWrite } from "@langchain/langgraph-checkpoint";
import type { CheckpointSaver, Copied, Cursor, Family, MigrationEndpoint, MigrationProgress, ThreadCopy } from "./endpoint.ts";
import { FAMILIES } from "./endpoint.ts";

export interface CopyReport {
  /** records copied per family by this run (not counting what an earlier run copied) */
  copied: Record<Family, number>;
  /** families skipped because an earlier run finished them */
  resumed: Family[];
}

export interface CopyOptions {
  /** records per progress update (and per store batch); default 100 */
  batch?: number;
  /** told after each record (store items: each batch): the family, how many of it are done, how many it has */
  onProgress?(family: Family, done: number, total: number): void;
}

export async function copyDeployment(from: MigrationEndpoint, to: MigrationEndpoint, opts: CopyOptions = {}): Promise<CopyReport> {
  const batch = Math.max(1, opts.batch ?? 100);
  const progress: MigrationProgress = (await to.readProgress(from.label)) ?? { source: from.label, done: [], copied: {} };
  const report: CopyReport = { copied: { assistants: 0, crons: 0, store: 0, threads: 0 }, resumed: [...progress.done] };
  for (const family of FAMILIES) {
    if (progress.done.includes(family)) continue;
    const total = await from.count(family);
    const after = progress.current?.family === family ? progress.current.after : undefined;
    let done = progress.copied[family] ?? 0;
    let pending = 0;
    const commit = async (cursor: MigrationProgress["current"]) => {
      progress.current = cursor;
      progress.copied[family] = done;
      await to.writeProgress(progress);
      opts.onProgress?.(family, done, total);
      pending = 0;
    };
    opts.onProgress?.(family, done, total);
    // store items and threads go in batches (one target write and commit per batch), the others one by one
    const copyBatched = async <T>(source: AsyncIterable<Copied<T>>, put: (items: T[]) => Promise<void>) => {
      let items: T[] = [];
      const flush = async () => {
        await put(items);
        done += items.length;
        report.copied[family] += items.length;
        items = [];
      };
      for await (const { item, cursor } of source) {
        items.push(item);
        if (items.length >= batch) {
          await flush();
          await commit({ family, after: cursor });
        }
      }
      if (items.length > 0) await flush();
    };
    if (family === "store") await copyBatched(from.storeItems(after), (items) => to.putStoreItems(items));
    else if (family === "threads") await copyBatched(from.threads(after), (items) => copyThreads(from, to, items));
    else {
      for await (const { cursor, copy } of records(from, to, family, after)) {
        await copy();
        done++;
        report.copied[family]++;
        if (++pending >= batch) await commit({ family, after: cursor });
        else opts.onProgress?.(family, done, total);
      }
    }
    progress.done.push(family);
    await commit(undefined);
  }
  return report;
}

/** How many threads of a batch copy their checkpoints at once (each is a chain of the target's writes). */
const CHECKPOINT_COPIES = 4;

/**
 * A batch of threads: their checkpoint histories (cleared first where the target may have some),
 * a few threads at a time, then their records in one write. A thread's record lands after its
 * checkpoints, so a crash in between leaves the batch to be copied again, never a thread without
 * its history.
 */
async function copyThreads(from: MigrationEndpoint, to: MigrationEndpoint, threads: ThreadCopy[]): Promise<void> {
  const ids = threads.map((t) => t.record.thread_id);
  const present = await to.threadsWithCheckpoints(ids);
  let next = 0;
  const copier = async () => {
    while (next < ids.length) {
      const id = ids[next++];
      await copyCheckpoints(from.saver, to.saver, id, { clear: present.has(id) });
    }
  };
  await Promise.all(Array.from({ length: Math.min(CHECKPOINT_COPIES, ids.length) }, copier));
  await to.putThreads(threads);
}

/** The family's records from the source, each with the write that copies it into the target. */
async function* records(from: MigrationEndpoint, to: MigrationEndpoint, family: "assistants" | "crons", after: Cursor | undefined) {
  switch (family) {
    case "assistants":
      for await (const { item, cursor } of from.assistants(after)) yield { cursor, copy: () => to.putAssistant(item) };
      return;
    case "crons":
      for await (const { item, cursor } of from.crons(after)) yield { cursor, copy: () => to.putCron(item) };
      return;
  }
}

interface CheckpointKey {
  ns: string;
  id: string;
  parentId: string | undefined;
  versions: Record<string, unknown>;
}

/**
 * A thread's whole checkpoint history, every namespace, through the savers: the target's copy is
 * removed first, then each checkpoint is put oldest first as a child of its parent, naming as new
 * the channels whose version differs from the parent's (what the live put did), with its pending
 * writes. Values are read one checkpoint at a time, so a long thread is never in memory whole.
 */
export async function copyCheckpoints(
  from: CheckpointSaver,
  to: CheckpointSaver,
  threadId: string,
  opts: { clear: boolean } = { clear: true },
): Promise<number> {
  if (opts.clear) await to.deleteThread(threadId);
  const keys: CheckpointKey[] = [];
  for await (const t of from.list({ configurable: { thread_id: threadId } })) {
    keys.push({
      ns: (t.config.configurable?.checkpoint_ns as string | undefined) ?? "",
      id: t.checkpoint.id,
      parentId: t.parentConfig?.configurable?.checkpoint_id as string | undefined,
      versions: { ...t.checkpoint.channel_versions },
    });
  }
  // checkpoint ids are time-ordered (uuid6): a parent is older than its children
  keys.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : a.ns < b.ns ? -1 : a.ns > b.ns ? 1 : 0));
  const versionsOf = new Map(keys.map((k) => [`${k.ns}\u0000${k.id}`, k.versions]));
  for (const key of keys) {
    const tuple = await from.getTuple({ configurable: { thread_id: threadId, checkpoint_ns: key.ns, checkpoint_id: key.id } });
    if (tuple === undefined) continue; // removed since it was listed
    const parent = key.parentId === undefined ? undefined : versionsOf.get(`${key.ns}\u0000${key.parentId}`);
    const newVersions: Record<string, number | string> = {};
    for (const [channel, version] of Object.entries(tuple.checkpoint.channel_versions)) {
      if (parent === undefined || parent[channel] !== version) newVersions[channel] = version;
    }
    const parentConfig = { configurable: { thread_id: threadId, checkpoint_ns: key.ns, ...(key.parentId ? { checkpoint_id: key.parentId } : {}) } };
    await to.put(parentConfig, tuple.checkpoint, tuple.metadata ?? ({} as NonNullable<CheckpointTuple["metadata"]>), newVersions);
    await putPendingWrites(to, threadId, key.ns, tuple);
  }
  await to.flush?.(threadId);
  return keys.length;
}

/**
 * A checkpoint's pending writes, per task in their order: a task's regular writes in one call
 * (their idx are their positions, as the live call gave them), each special write (idx < 0) alone.
 */
async function putPendingWrites(to: CheckpointSaver, threadId: string, ns: string, tuple: CheckpointTuple): Promise<void> {
  const config = { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: tuple.checkpoint.id } };
  const byTask = new Map<string, PendingWrite[]>();
  for (const [taskId, channel, value] of tuple.pendingWrites ?? []) {
    if (WRITES_IDX_MAP[channel] !== undefined) {
      await to.putWrites(config, [[channel, value]], taskId);
      continue;
    }
    const list = byTask.get(taskId) ?? [];
    list.push([channel, value]);
    byTask.set(taskId, list);
  }
  for (const [taskId, writes] of byTask) await to.putWrites(config, writes, taskId);
}
