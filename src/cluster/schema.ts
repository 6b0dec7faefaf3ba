// The cluster's tables, one migration of their own (appended to src/storage/postgres/schema.ts):
// nothing here refers to the record tables, so it applies whatever else the schema holds.
/*
 * - cluster_nodes: one row per node id; `instance` is the process behind it (a restart under the
 *   same --node-id is a new instance), alive while expires_at (last heartbeat + TTL) is ahead.
 * - thread_leases: which node runs a thread's actor, until expires_at (renewed by that node's
 *   heartbeat). `epoch` comes from one sequence, so it never repeats for a thread even after
 *   its row was deleted: a (thread, epoch) pair names one holding, and fenced writes check it.
 * - cluster_commands: requests forwarded to the node owning a thread, claimed by deleting them.
 * - cluster_payloads: bus messages too large for NOTIFY (the notification carries the row id);
 *   removed by age.
 * - cron_ticks: the last tick fired per cron; a node fires a tick only by moving it forward.
 * - webhook_outbox.node_id (migration 5): the node whose webhook worker makes the delivery: the
 *   one that finished the run (the session's troupe.node_id, set by every pool of a cluster node),
 *   until a live node takes the deliveries of a dead one over (webhook-drain.ts).
 * Times are the database's (timestamptz), so nodes' clocks never have to agree.
 */
import type { Migration } from "../storage/postgres/schema.ts";

export const CLUSTER_MIGRATION: Omit<Migration, "version"> = {
  name: "cluster",
  sql: `
CREATE TABLE cluster_nodes (
  node_id text COLLATE "C" PRIMARY KEY,
  instance text COLLATE "C" NOT NULL,
  started_at timestamptz NOT NULL,
  heartbeat_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  draining boolean NOT NULL DEFAULT false,
  info jsonb NOT NULL DEFAULT '{}'
);

CREATE SEQUENCE thread_lease_epochs;
CREATE TABLE thread_leases (
  thread_id text COLLATE "C" PRIMARY KEY,
  node_id text COLLATE "C" NOT NULL,
  epoch bigint NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE INDEX thread_leases_node ON thread_leases (node_id);
CREATE INDEX thread_leases_expiry ON thread_leases (expires_at);

CREATE TABLE cluster_commands (
  id bigserial PRIMARY KEY,
  target_node text COLLATE "C" NOT NULL,
  sender_node text COLLATE "C" NOT NULL,
  body text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX cluster_commands_target ON cluster_commands (target_node, id);

CREATE TABLE cluster_payloads (
  id bigserial PRIMARY KEY,
  channel text COLLATE "C" NOT NULL,
  body text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX cluster_payloads_age ON cluster_payloads (created_at);

CREATE TABLE cron_ticks (
  cron_id text COLLATE "C" PRIMARY KEY,
  tick_at timestamptz NOT NULL,
  node_id text COLLATE "C" NOT NULL,
  claimed_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
`,
};

/** Which node delivers each webhook (the record tables' migration 2 made webhook_outbox). */
export const CLUSTER_WEBHOOKS_MIGRATION: Omit<Migration, "version"> = {
  name: "cluster-webhooks",
  sql: `
ALTER TABLE webhook_outbox ADD COLUMN node_id text COLLATE "C" DEFAULT current_setting('troupe.node_id', true);
CREATE INDEX webhook_outbox_node ON webhook_outbox (node_id);
`,
};
