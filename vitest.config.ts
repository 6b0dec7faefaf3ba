import { defineConfig } from "vitest/config";

/**
 * Files the e2e-postgres project leaves out, and why: they start no server, or what they test is
 * one backend's own (the rest of the e2e files run on both backends).
 */
const NOT_ON_POSTGRES = [
  "test/unit/**", // in-process, no storage backend
  "test/storage-port/**", // the port's own suites: they run each adapter (or PostgreSQL) themselves
  "test/cluster-*.test.ts", // cluster mode: PostgreSQL already
  "test/e2e-cluster*.test.ts", // three servers on PostgreSQL already
  "test/checkpointer-postgres*.test.ts", // the Postgres saver in-process: PostgreSQL already
  "test/postgres-migrations.test.ts", // PostgreSQL already
  "test/e2e-postgres.test.ts", // servers on PostgreSQL already (--database-uri, startup errors)
  "test/control-plane-deployments.test.ts", // the control plane starts its deployments on their own data dirs (LMDB)
  "test/cli.test.ts", // help and usage errors: no server reaches its storage
  "test/examples.test.ts", // graphs in-process on MemorySaver
  "test/idle-gc.test.ts", // in-process; LMDB's file mapping
  "test/message-chunks.test.ts", // the LMDB saver in-process (the Postgres saver: checkpointer-postgres)
  "test/webhooks.test.ts", // the outbox on LMDB in-process (on PostgreSQL: storage-port/webhooks-postgres)
  "test/compile-cache-race.test.ts", // the compile cache: no server, no storage
];

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
      // the same server-spawning files with every server on PostgreSQL (a fresh database per data
      // dir, test/helpers/server.ts), on the same PostgreSQL server as the e2e project
      {
        extends: true,
        test: {
          name: "e2e-postgres",
          include: ["test/**/*.test.ts"],
          exclude: [...NOT_ON_POSTGRES, "**/node_modules/**"],
          env: { TROUPE_TEST_BACKEND: "postgres" },
          globalSetup: ["test/helpers/postgres-server.ts"],
        },
      },
    ],
  },
});
