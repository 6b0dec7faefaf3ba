// Loads the small native addon in native/memory.cc (built by `npm install` through node-gyp).
// It is optional: without it (no compiler at install time) the server runs the same and only keeps
// more memory resident after a load burst (plain gc(), no trim, no unmapping of the data file).
import { realpathSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

interface NativeMemory {
  /** glibc malloc_trim(0): returns free arena pages to the OS; true when something was released */
  trim(): boolean;
  /** false where the C library has no malloc_trim (musl, macOS): trim() then does nothing */
  supported(): boolean;
  /** V8 MemoryPressureNotification(kCritical) on the calling thread's isolate: a shrinking full GC */
  reduceHeap(): void;
  /** MADV_DONTNEED on this process's shared mappings of `path` (canonical); returns the bytes advised */
  releaseSharedFileMapping(path: string): number;
}

const ADDON_PATH = new URL("../../build/Release/troupe_memory.node", import.meta.url);

let loaded: NativeMemory | null | undefined;
let loadError: string | undefined;

/** The addon, or null when it was not built; `nativeMemoryError()` says why. */
export function nativeMemory(): NativeMemory | null {
  if (loaded === undefined) {
    try {
      loaded = createRequire(import.meta.url)(fileURLToPath(ADDON_PATH)) as NativeMemory;
    } catch (err) {
      loaded = null;
      loadError = err instanceof Error ? err.message.split("\n")[0] : String(err);
    }
  }
  return loaded;
}

export function nativeMemoryError(): string | undefined {
  nativeMemory();
  return loadError;
}

/**
 * Unmaps the resident pages of a file this process maps shared and read-only (the LMDB data file):
 * they stay in the kernel's page cache and come back on the next access. Returns bytes advised.
 */
export function releaseFileMapping(path: string): number {
  const addon = nativeMemory();
  if (addon === null) return 0;
  let canonical: string;
  try {
    canonical = realpathSync(path); // /proc/self/maps names the file by its real path
  } catch {
    return 0;
  }
  return addon.releaseSharedFileMapping(canonical);
}

/** A full GC that also compacts and shrinks this thread's V8 heap; false without the addon. */
export function reduceHeap(): boolean {
  const addon = nativeMemory();
  if (addon === null) return false;
  addon.reduceHeap();
  return true;
}

/** Gives freed C-heap memory back to the OS where possible; false when nothing could be done. */
export function trimCHeap(): boolean {
  const addon = nativeMemory();
  return addon !== null && addon.trim();
}
