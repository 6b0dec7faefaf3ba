// Opt-in CPU profiles of worker threads. Node's --cpu-prof writes a profile only for threads that
// exit on their own, and Piscina terminates its workers, so a shard profiles itself through the
// inspector when TROUPE_CPU_PROFILE_DIR is set and writes the profile when it shuts down.
import { Session } from "node:inspector";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export interface CpuProfiler {
  /** stops profiling and writes `<dir>/<label>-<pid>-<time>.cpuprofile`; resolves to its path */
  stop(): Promise<string | undefined>;
}

const post = (session: Session, method: string, params?: object): Promise<unknown> =>
  new Promise((resolve, reject) => session.post(method, params ?? {}, (err, result) => (err ? reject(err) : resolve(result))));

/** Starts profiling this thread when `dir` is set (sampling every 250 µs); otherwise a no-op. */
export function startCpuProfile(dir: string | undefined, label: string): CpuProfiler {
  if (!dir) return { stop: async () => undefined };
  const session = new Session();
  session.connect();
  const started = post(session, "Profiler.enable")
    .then(() => post(session, "Profiler.setSamplingInterval", { interval: 250 }))
    .then(() => post(session, "Profiler.start"));
  return {
    async stop() {
      await started;
      const { profile } = (await post(session, "Profiler.stop")) as { profile: object };
      session.disconnect();
      mkdirSync(dir, { recursive: true });
      const file = join(dir, `${label}-${process.pid}-${Date.now()}.cpuprofile`);
      writeFileSync(file, JSON.stringify(profile));
      return file;
    },
  };
}
