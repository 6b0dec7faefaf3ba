import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    globals: true,
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Each file spawns its own server on port 0 with its own data dir; two cores in CI.
    fileParallelism: true,
    maxWorkers: 2,
    // Node 20 has WebSocket (the SDK's websocket transport, test/e2e-thread-protocol.test.ts) behind a flag
    execArgv: ["--experimental-websocket"],
  },
});
