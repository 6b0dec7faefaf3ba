// Which shard (actor worker) owns a thread: FNV-1a of the thread id, so the HTTP thread and
// every worker agree without coordination.
export function shardOf(threadId: string, shardCount: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < threadId.length; i++) {
    h ^= threadId.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % shardCount;
}
