// troupe_memory: gives memory back to the OS when the server goes idle after a load burst.
// - trim(): glibc's malloc_trim(0). Node's ArrayBuffers and uWebSockets' buffers are malloc'd; glibc
//   keeps freed chunks inside its arenas (only the top of a heap is ever returned), so an idle
//   server kept ~100 MB of freed C heap resident. malloc_trim walks every arena and madvises free
//   pages away.
// - releaseSharedFileMapping(path): MADV_DONTNEED on this process's shared mappings of one file
//   (the LMDB data file). LMDB reads through a read-only shared map, so every page a write or read
//   ever touched stays mapped and counts in RSS. Dropping the mapping loses nothing: the pages stay
//   in the kernel's page cache and are mapped again on the next access (a minor fault).
// - reduceHeap(): tells the calling thread's V8 isolate that memory is tight (what V8's memory
//   reducer does on its own only ~10-20 s into an idle period): a full GC that compacts, shrinks
//   the young generation and frees pooled pages. gc() from --expose-gc does not shrink.
#include <node_api.h>
#include <v8.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

static napi_value Trim(napi_env env, napi_callback_info info) {
  (void)info;
  int released = 0;
#if defined(__GLIBC__)
  released = malloc_trim(0);
#endif
  napi_value result;
  napi_get_boolean(env, released != 0, &result);
  return result;
}

static napi_value Supported(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value result;
#if defined(__GLIBC__)
  napi_get_boolean(env, 1, &result);
#else
  napi_get_boolean(env, 0, &result);
#endif
  return result;
}

static napi_value ReleaseSharedFileMapping(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  char path[4096];
  size_t path_len = 0;
  double released = 0;
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  if (argc < 1 || napi_get_value_string_utf8(env, argv[0], path, sizeof(path), &path_len) != napi_ok || path_len == 0) {
    napi_throw_type_error(env, nullptr, "releaseSharedFileMapping(path): path must be a non-empty string");
    return nullptr;
  }
#if defined(__linux__)
  FILE* maps = fopen("/proc/self/maps", "r");
  if (maps != nullptr) {
    char line[4096 + 256];
    while (fgets(line, sizeof(line), maps) != nullptr) {
      unsigned long start, end;
      char perms[8];
      int name_at = 0;
      // start-end perms offset dev inode pathname
      if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &start, &end, perms, &name_at) < 3 || name_at == 0) continue;
      char* name = line + name_at;
      name[strcspn(name, "\n")] = '\0';
      // shared mappings only: on a private one DONTNEED would drop copy-on-write changes
      if (perms[3] != 's' || strcmp(name, path) != 0) continue;
      if (madvise(reinterpret_cast<void*>(start), end - start, MADV_DONTNEED) == 0) released += (double)(end - start);
    }
    fclose(maps);
  }
#endif
  napi_value result;
  napi_create_double(env, released, &result);
  return result;
}

static napi_value ReduceHeap(napi_env env, napi_callback_info info) {
  (void)info;
  v8::Isolate* isolate = v8::Isolate::GetCurrent();
  if (isolate != nullptr) isolate->MemoryPressureNotification(v8::MemoryPressureLevel::kCritical);
  napi_value result;
  napi_get_undefined(env, &result);
  return result;
}

static napi_value Init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    {"reduceHeap", 0, ReduceHeap, 0, 0, 0, napi_default, 0},
    {"releaseSharedFileMapping", 0, ReleaseSharedFileMapping, 0, 0, 0, napi_default, 0},
    {"trim", 0, Trim, 0, 0, 0, napi_default, 0},
    {"supported", 0, Supported, 0, 0, 0, napi_default, 0},
  };
  napi_define_properties(env, exports, sizeof(props) / sizeof(props[0]), props);
  return exports;
}

NAPI_MODULE_INIT() { return Init(env, exports); }
