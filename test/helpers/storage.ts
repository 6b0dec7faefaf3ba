// A fresh LMDB storage in a temp dir for each test of the calling file or describe block, closed
// and removed after it.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach } from "vitest";
import { openStorage, type Storage } from "../../src/storage/env.ts";

export interface TempStorage {
  readonly storage: Storage;
  readonly dir: string;
}

export function useTempStorage(prefix: string): TempStorage {
  let current: { storage: Storage; dir: string } | undefined;
  beforeEach(() => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    current = { dir, storage: openStorage(dir) };
  });
  afterEach(async () => {
    if (current === undefined) return;
    await current.storage.close();
    fs.rmSync(current.dir, { recursive: true, force: true });
    current = undefined;
  });
  const get = () => {
    if (current === undefined) throw new Error("useTempStorage: only inside a test");
    return current;
  };
  return {
    get storage() {
      return get().storage;
    },
    get dir() {
      return get().dir;
    },
  };
}
