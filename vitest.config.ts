import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    globals: true,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Each file spawns its own server on port 0 with its own data dir; two cores in CI.
    fileParallelism: true,
    maxWorkers: 2,
    // Node 20 has WebSocket (the SDK's websocket transport, test/e2e-thread-protocol.test.ts) behind a flag
    execArgv: ["--experimental-websocket"],
    projects: [
      // in-process and fast: no server process, no long soak (npm run test:unit)
      { extends: true, test: { name: "unit", include: ["test/unit/**/*.test.ts"] } },
      // servers spawned as users run them, and the long in-process soaks
      // (and one PostgreSQL server for the Postgres tests, started in the background: test/helpers/postgres-server.ts)
      {
        extends: true,
        test: {
          name: "e2e",
          include: ["test/**/*.test.ts"],
          exclude: ["test/unit/**", "**/node_modules/**"],
          globalSetup: ["test/helpers/postgres-server.ts"],
        },
      },
    ],
  },
});
