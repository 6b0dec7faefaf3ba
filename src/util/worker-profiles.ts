// Opt-in profiles of worker threads, taken through the inspector. Node's --cpu-prof writes a profile
// only for threads that exit on their own, and Piscina terminates its workers, so a shard profiles
// itself and writes the files when it shuts down. Three kinds, each switched on by its directory:
// - TROUPE_CPU_PROFILE_DIR: where the time goes (V8 sampling profiler, every 250 µs), .cpuprofile;
// - TROUPE_HEAP_PROFILE_DIR: where the garbage comes from (every allocation sampled, also those a
//   GC has collected since), .heapprofile;
// - TROUPE_CALL_COUNTS_DIR: how often each function ran (precise coverage with call counts), .callcounts
//   — tells "the same code called more often" from "the same calls taking longer" when two profiles differ.
import { Session } from "node:inspector";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export interface RunningProfile {
  /** stops profiling and writes `<dir>/<label>-<pid>-<time>.<ext>`; resolves to its path */
  stop(): Promise<string | undefined>;
}

interface ProfileKind {
  ext: string;
  start: Array<[method: string, params?: object]>;
  stop: string;
  /** the part of the stop method's result written to the file */
  pick(result: Record<string, unknown>): unknown;
}

const KINDS = {
  cpu: {
    ext: "cpuprofile",
    start: [["Profiler.enable"], ["Profiler.setSamplingInterval", { interval: 250 }], ["Profiler.start"]],
    stop: "Profiler.stop",
    pick: (r) => r.profile,
  },
  heap: {
    ext: "heapprofile",
    start: [
      ["HeapProfiler.enable"],
      ["HeapProfiler.startSampling", { samplingInterval: 16384, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true }],
    ],
    stop: "HeapProfiler.stopSampling",
    pick: (r) => r.profile,
  },
  calls: {
    ext: "callcounts",
    start: [["Profiler.enable"], ["Profiler.startPreciseCoverage", { callCount: true, detailed: false }]],
    stop: "Profiler.takePreciseCoverage",
    pick: (r) => r.result,
  },
} satisfies Record<string, ProfileKind>;

export type ProfileKindName = keyof typeof KINDS;

const post = (session: Session, method: string, params?: object): Promise<Record<string, unknown>> =>
  new Promise((resolve, reject) => session.post(method, params ?? {}, (err, result) => (err ? reject(err) : resolve(result as Record<string, unknown>))));

/** Starts a profile of this thread when `dir` is set; otherwise a no-op. */
export function startProfile(kind: ProfileKindName, dir: string | undefined, label: string): RunningProfile {
  if (!dir) return { stop: async () => undefined };
  const k: ProfileKind = KINDS[kind];
  const session = new Session();
  session.connect();
  const started = k.start.reduce<Promise<unknown>>((chain, [method, params]) => chain.then(() => post(session, method, params)), Promise.resolve());
  started.catch(() => undefined); // a failed start is reported by stop(), not as an unhandled rejection
  return {
    async stop() {
      await started;
      const result = await post(session, k.stop);
      session.disconnect();
      mkdirSync(dir, { recursive: true });
      const file = join(dir, `${label}-${process.pid}-${Date.now()}.${k.ext}`);
      writeFileSync(file, JSON.stringify(k.pick(result)));
      return file;
    },
  };
}

/** The profiles the environment asks for (TROUPE_CPU_PROFILE_DIR, TROUPE_HEAP_PROFILE_DIR,
 *  TROUPE_CALL_COUNTS_DIR); stop() writes them all and resolves to the files written. */
export function startProfilesFromEnv(env: NodeJS.ProcessEnv, label: string): { stop(): Promise<string[]> } {
  const running = [
    startProfile("cpu", env.TROUPE_CPU_PROFILE_DIR, label),
    startProfile("heap", env.TROUPE_HEAP_PROFILE_DIR, label),
    startProfile("calls", env.TROUPE_CALL_COUNTS_DIR, label),
  ];
  return {
    async stop() {
      const files = await Promise.all(running.map((p) => p.stop()));
      return files.filter((f): f is string => f !== undefined);
    },
  };
}
