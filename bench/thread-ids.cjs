// Preload (NODE_OPTIONS="--require bench/thread-ids.cjs", TID_DIR=dir) for bench/run-costs.sh: each
// thread that loads it (the main thread, the actor workers) appends "TID main|worker" to
// TID_DIR/tids-PID.txt, so its CPU in /proc/PID/task/TID/stat can be told apart (Node names every
// thread "node"). Threads started with their own execArgv (the webhook worker) and V8's and libuv's
// helper threads do not load it: they count as "other".
const fs = require("node:fs");
const { isMainThread } = require("node:worker_threads");
try {
  const dir = process.env.TID_DIR;
  const tid = fs.readlinkSync("/proc/thread-self").split("/").pop();
  if (dir) fs.appendFileSync(`${dir}/tids-${process.pid}.txt`, `${tid} ${isMainThread ? "main" : "worker"}\n`);
} catch {
  // not Linux: no per-thread figures
}
