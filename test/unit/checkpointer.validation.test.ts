// Runs the official LangGraph checkpointer conformance suite (718 tests) against LmdbCheckpointSaver,
// each checkpointer on its own fresh LMDB env in a temp dir.
import { validate } from "@langchain/langgraph-checkpoint-validation";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LmdbCheckpointSaver } from "../../src/storage/checkpoints/lmdb-saver.ts";
import { openStorage, type Storage } from "../../src/storage/env.ts";

const opened = new Map<LmdbCheckpointSaver, { dir: string; storage: Storage }>();

validate({
  checkpointerName: "troupe-lmdb",
  createCheckpointer() {
    const dir = mkdtempSync(join(tmpdir(), "troupe-ckpt-validation-"));
    const storage = openStorage(dir, { syncCommits: false });
    const saver = new LmdbCheckpointSaver(storage);
    opened.set(saver, { dir, storage });
    return saver;
  },
  async destroyCheckpointer(saver) {
    const entry = opened.get(saver);
    if (entry === undefined) return;
    opened.delete(saver);
    await entry.storage.close();
    rmSync(entry.dir, { recursive: true, force: true });
  },
});
