// Preloaded (`node --import`) into every deployment server the control plane spawns. The server
// is a child with an IPC channel: when the control plane dies, even by kill -9, the channel
// closes and the server drains and exits (SIGTERM) instead of living on as an orphan that keeps
// the port and the data directory. Plain JS: it is preloaded before any of our code is compiled.
if (process.channel) {
  process.once("disconnect", () => process.kill(process.pid, "SIGTERM"));
  process.channel.unref();
}
