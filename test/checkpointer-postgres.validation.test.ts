// The official LangGraph checkpointer conformance suite against PostgresCheckpointSaver on a real
// PostgreSQL (this file's own database). The suite makes a checkpointer per test; they share one
// migrated schema, emptied after each (the suite's list() tests read every thread). The opt-in
// delta-history tests run too.
import { deltaChannelHistoryTests, validate } from "@langchain/langgraph-checkpoint-validation";
import { migrate } from "../src/storage/postgres/migrations.ts";
import { PostgresCheckpointSaver } from "../src/storage/postgres/checkpointer.ts";
import { openPostgres, type PostgresDb } from "../src/storage/postgres/pool.ts";
import { createTestDatabase, type TestDatabase } from "./helpers/postgres.ts";

let database: TestDatabase | undefined;
let db: PostgresDb | undefined;

async function sharedDb(): Promise<PostgresDb> {
  if (db === undefined) {
    database = await createTestDatabase();
    db = openPostgres({ uri: database.uri, schema: "troupe", maxConnections: 4 });
    await migrate(db);
  }
  return db;
}

afterAll(async () => {
  await db?.close();
  await database?.drop();
});

const initializer = {
  checkpointerName: "troupe-postgres",
  async createCheckpointer() {
    return new PostgresCheckpointSaver(await sharedDb());
  },
  async destroyCheckpointer() {
    await db?.pool.query("TRUNCATE checkpoints, checkpoint_blobs, checkpoint_chunks, checkpoint_writes");
  },
};
validate(initializer);
// opt-in part of the suite (getDeltaChannelHistory through this saver's storage)
deltaChannelHistoryTests(initializer);
