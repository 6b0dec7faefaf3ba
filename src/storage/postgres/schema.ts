// The versioned schema: each migration is applied once, in order, by migrate() (migrations.ts).
// A released migration is never edited: changes go into a new one with the next version.
import { ROW_COUNTS } from "./schema-counts.ts";
import { RECORD_TABLES } from "./schema-records.ts";
/*
 * Checkpoint tables (version 1). Names follow the LangGraph ecosystem's (checkpoints,
 * checkpoint_blobs, checkpoint_writes), the layout is Troupe's own (docs/STORAGE.md says why):
 * - checkpoints: the checkpoint serialized without channel_values (serde type + bytes), its
 *   metadata (serde bytes, and as jsonb for metadata filters when it is plain JSON), and
 *   blob_refs {channel: [version, owner]}: which blob holds each channel's value. A put names
 *   the blobs it writes with its own id as owner and inherits its parent's refs for channels whose
 *   version did not change, so a fork writing another value under an existing version number
 *   never collides with the other branch's.
 * - checkpoint_blobs: one value per (channel, version, owner); a message list of 64+ messages is
 *   stored as the ids of shared chunks plus its tail (message-chunks.ts), chunks in
 *   checkpoint_chunks, so a long thread's history is O(messages) bytes.
 * - checkpoint_writes: pending writes; task_path for LangGraph's write order, run_id for rollback.
 * Versions are stored as JSON text (1 and "1" are different versions). Key columns compare
 *   bytewise (COLLATE "C"): checkpoint ids order as LangGraph orders them, whatever the
 *   database's locale.
 */
import { THREAD_TERMS, THREAD_TERMS_DELETE_BY_KEY } from "./schema-terms.ts";
import { THREAD_VALUES_UNCOMPRESSED } from "./schema-values.ts";
import { CLUSTER_MIGRATION, CLUSTER_WEBHOOKS_MIGRATION } from "../../cluster/schema.ts";

export interface Migration {
  version: number;
  name: string;
  /** statements run in one transaction */
  sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: "checkpoints",
    sql: `
CREATE TABLE checkpoints (
  thread_id text COLLATE "C" NOT NULL,
  checkpoint_ns text COLLATE "C" NOT NULL DEFAULT '',
  checkpoint_id text COLLATE "C" NOT NULL,
  parent_checkpoint_id text COLLATE "C",
  run_id text,
  type text NOT NULL,
  checkpoint bytea NOT NULL,
  metadata_type text NOT NULL,
  metadata bytea NOT NULL,
  metadata_json jsonb,
  blob_refs jsonb NOT NULL DEFAULT '{}',
  PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
);
CREATE INDEX checkpoints_run ON checkpoints (thread_id, run_id) WHERE run_id IS NOT NULL;
CREATE INDEX checkpoints_metadata ON checkpoints USING gin (metadata_json jsonb_path_ops);

CREATE TABLE checkpoint_blobs (
  thread_id text COLLATE "C" NOT NULL,
  checkpoint_ns text COLLATE "C" NOT NULL DEFAULT '',
  channel text COLLATE "C" NOT NULL,
  version text COLLATE "C" NOT NULL,
  owner text COLLATE "C" NOT NULL,
  type text NOT NULL,
  blob bytea NOT NULL,
  chunks text[],
  PRIMARY KEY (thread_id, checkpoint_ns, channel, version, owner)
);

CREATE TABLE checkpoint_chunks (
  thread_id text COLLATE "C" NOT NULL,
  checkpoint_ns text COLLATE "C" NOT NULL DEFAULT '',
  channel text COLLATE "C" NOT NULL,
  chunk_id text COLLATE "C" NOT NULL,
  bytes bytea NOT NULL,
  PRIMARY KEY (thread_id, checkpoint_ns, channel, chunk_id)
);

CREATE TABLE checkpoint_writes (
  thread_id text COLLATE "C" NOT NULL,
  checkpoint_ns text COLLATE "C" NOT NULL DEFAULT '',
  checkpoint_id text COLLATE "C" NOT NULL,
  task_id text COLLATE "C" NOT NULL,
  idx integer NOT NULL,
  channel text COLLATE "C" NOT NULL,
  type text NOT NULL,
  blob bytea NOT NULL,
  task_path text NOT NULL DEFAULT '',
  run_id text,
  PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
);
CREATE INDEX checkpoint_writes_run ON checkpoint_writes (thread_id, run_id) WHERE run_id IS NOT NULL;
`,
  },
  RECORD_TABLES,
  // cluster mode (src/cluster/schema.ts): self-contained
  { version: 3, ...CLUSTER_MIGRATION },
  { version: 4, ...ROW_COUNTS },
  { version: 5, ...CLUSTER_WEBHOOKS_MIGRATION },
  { version: 6, ...THREAD_TERMS },
  { version: 7, ...THREAD_VALUES_UNCOMPRESSED },
  { version: 8, ...THREAD_TERMS_DELETE_BY_KEY },
];
