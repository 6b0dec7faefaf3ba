// RunsPort on Postgres (table runs; its partial index on pending/running runs is LMDB's
// active_runs, its primary key LMDB's run_thread). Written only by the thread's actor, on the
// thread's write chain. A run's create, start and finish are one statement each: the run row and
// the thread row change together (data-modifying CTEs), in one round trip.
import type pg from "pg";
import { fenceManySql, fenceManyValues, fencedStatements, guardAlso, type Fence, type Guard, type NamedStatement } from "../../cluster/fence.ts";
import { assistantChanged, threadNotFound } from "../../errors.ts";
import type { ActiveRun, AssistantCheck, Issued, QueuedStop, RunKey, RunsPort } from "../port.ts";
import { assistantCheckSql, assistantCheckValues } from "./assistants.ts";
import type { RunRecord, RunStatus, ThreadRecord, ThreadStatus, WebhookDeliveryRecord } from "../records.ts";
import { arrayColumns, byteaArray, textArray } from "./binary-arrays.ts";
import { jsonText } from "./json-columns.ts";
import { bytesParam, threadRowValues, upsertThreadSql } from "./threads.ts";
import { deliveryValues, enqueueSql } from "./webhooks.ts";
import { mergeable, oncePerThread, type MergeKind, type ThreadWriteChains } from "./write-chains.ts";

interface RunRow {
  record: RunRecord;
  kwargs: RunRecord["kwargs"];
}

/** The record as stored: kwargs (written once, at create) in their own column, a null in its place keeps the key order. */
const recordText = (run: RunRecord): string => jsonText({ ...run, kwargs: null });

const toRun = (row: RunRow): RunRecord => {
  const run = row.record;
  run.kwargs = row.kwargs;
  return run;
};

const SELECT = "SELECT record, kwargs FROM runs";

/** Rows read per statement by the iterating reads (active, ofAssistant). */
const BATCH = 500;

/** The next batch of runs matching `where` (parameters `values`) after `after` in (thread_id, run_id) order. */
export function walkStatement(where: string, values: unknown[], after: [string, string]): { text: string; values: unknown[] } {
  const n = values.length;
  return {
    text: `SELECT record, kwargs, thread_id, run_id FROM runs WHERE ${where} AND (thread_id, run_id) > ($${n + 1}, $${n + 2})
     ORDER BY thread_id, run_id LIMIT ${BATCH}`,
    values: [...values, ...after],
  };
}

export const ACTIVE = "status IN ('pending', 'running')";

// Each write statement is written once (fencedStatements): its plain form, and the fenced one a
// cluster node sends while it holds the thread's lease (docs/CLUSTER.md "Fencing").

const insertRun = (g: Guard) => `INSERT INTO runs (run_id, thread_id, assistant_id, status, record, kwargs) ${g.row("$7, $1, $8, $9, $10::json, $11::json")}`;

type Statements = { plain: NamedStatement; fenced: NamedStatement };

/**
 * A run create statement in its plain form and, for a run whose assistant came from the HTTP
 * thread's cache (AssistantsPort.forRun), its checked form: the assistant's row must still be the
 * version the cache read (assistantCheckSql at $checkAt, $checkAt+1), else none of its writes
 * keeps a row and it answers `assistant_current` false. Each fenced as well (fencedStatements).
 */
function createStatements(
  name: string,
  parts: (g: Guard) => [string, string][],
  checkAt: number,
  answer?: string,
): { unchecked: Statements; checked: Statements } {
  const check = assistantCheckSql(checkAt);
  return {
    unchecked: fencedStatements(name, parts, answer),
    checked: fencedStatements(
      `${name}_checked`,
      (g) => [check.part, ...parts(guardAlso(g, check.holds))],
      `${check.holds} AS assistant_current${answer === undefined ? "" : `, ${answer}`}`,
    ),
  };
}

/** A run create: the run ($7 run_id, $8 assistant_id, $9 status, $10 record, $11 kwargs) and the thread's row ($1..$6). */
const CREATE = createStatements(
  "troupe_run_create",
  (g) => [
    ["r", insertRun(g)],
    ["t", upsertThreadSql(1, false, g.when)],
  ],
  12,
);

/**
 * A run create on a thread whose row exists (the actor knows its record): the thread row updated,
 * not upserted. An INSERT into threads, even one that inserts nothing, fires the row-count
 * statement trigger (schema-counts.ts), which PostgreSQL plans again on every call (its query reads
 * the transition table): ~15% of the server's CPU per run at wait-c64 went to those triggers.
 * The run is inserted only with the thread row; `updated` 0 says the row was gone (deleted behind
 * the actor's back): nothing is written and the create fails as on a missing thread.
 */
const CREATE_ON_THREAD = createStatements(
  "troupe_run_create_on_thread",
  (g) => [
    ["t", `UPDATE threads SET status = $2, created_at = $3, updated_at = $4, metadata = $5::jsonb, record = $6::json WHERE thread_id = $1${g.and} RETURNING 1`],
    [
      "r",
      `INSERT INTO runs (run_id, thread_id, assistant_id, status, record, kwargs) SELECT $7, $1, $8, $9, $10::json, $11::json WHERE EXISTS (SELECT 1 FROM t)`,
    ],
  ],
  12,
  "(SELECT count(*)::int FROM t) AS updated",
);

/** A run create on a thread whose row exists, for a statement creating several (CREATE_ON_THREAD_MANY). */
interface CreateOnThreadItem {
  threadId: string;
  /** CREATE_ON_THREAD's $1-$11 (first in the array) */
  values: unknown[];
  assistant: AssistantCheck | undefined;
  fence: Fence | undefined;
}

// The run creates of a batch (a group's: several threads', each on its own thread) as one
// statement: CREATE_ON_THREAD for each, each gated by its own fence (`h`) and, a cached
// assistant's, by its check (`a`: the assistant's row still the version read); one per thread
// (two would update its row twice). Exclusive (MergeKind): it writes the thread's row, as a run
// end does, so it shares no statement with another write of its thread.
const F_MANY_CREATE = fenceManySql(16, "§troupe_fence");
const CREATE_ON_THREAD_MANY_CTES = `
§items AS MATERIALIZED (
  SELECT u.thread_id, u.status, u.created_at, u.updated_at, u.metadata::jsonb AS metadata, u.record::json AS record, u.run_id, u.assistant_id,
    u.run_status, u.run_record::json AS run_record, u.kwargs::json AS kwargs, u.check_assistant, u.check_stamp, u.epoch, u.ord::int AS ord
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[],
    $12::text[], $13::text[], $14::bigint[])
    WITH ORDINALITY u(thread_id, status, created_at, updated_at, metadata, record, run_id, assistant_id, run_status, run_record, kwargs,
      check_assistant, check_stamp, epoch, ord)
), ${F_MANY_CREATE.cte}, §held AS MATERIALIZED (
  SELECT array_agg(${F_MANY_CREATE.holdsFor("i.thread_id", "i.epoch")} ORDER BY i.ord) AS h,
    array_agg(i.check_assistant IS NULL OR EXISTS (SELECT 1 FROM assistants a WHERE a.assistant_id = i.check_assistant AND a.xmin = i.check_stamp::xid)
      ORDER BY i.ord) AS a
  FROM §items i
), §t AS (
  UPDATE threads SET status = i.status, created_at = i.created_at, updated_at = i.updated_at, metadata = i.metadata, record = i.record
  FROM §items i WHERE threads.thread_id = ANY($1::text[]) AND threads.thread_id = i.thread_id AND (SELECT h FROM §held)[i.ord] AND (SELECT a FROM §held)[i.ord]
  RETURNING threads.thread_id
), §r AS (
  INSERT INTO runs (run_id, thread_id, assistant_id, status, record, kwargs)
  SELECT i.run_id, i.thread_id, i.assistant_id, i.run_status, i.run_record, i.kwargs FROM §items i JOIN §t t ON t.thread_id = i.thread_id
), §answer AS (
  SELECT i.ord, (SELECT h FROM §held)[i.ord] AS held, (SELECT a FROM §held)[i.ord] AS assistant_current,
    (SELECT count(*)::int FROM §t t WHERE t.thread_id = i.thread_id) AS updated
  FROM §items i
)`;

const CREATE_ON_THREAD_MANY: MergeKind<CreateOnThreadItem> = {
  accepts: oncePerThread(),
  name: "troupe_run_create_on_thread_many",
  ctes: CREATE_ON_THREAD_MANY_CTES,
  answers: [
    ["assistant_current", "boolean"],
    ["updated", "int"],
  ],
  exclusive: true,
  values(items): unknown[] {
    // the JSON binary (binary-arrays.ts): records and kwargs can be large
    return [
      ...arrayColumns(
        items.map((i) => i.values),
        ["plain", "plain", "plain", "plain", "text", "text", "plain", "plain", "plain", "text", "text"],
      ),
      items.map((i) => i.assistant?.assistantId ?? null),
      items.map((i) => i.assistant?.stamp ?? null),
      items.map((i) => i.fence?.epoch ?? null),
      ...fenceManyValues(items.map((i) => i.fence)),
    ];
  },
};

/**
 * The ends of queued runs stopped (queuedStopValues at $first..$first+7): finals (run ids,
 * statuses, records), their deliveries (run ids, next attempts, records, values), rolled back (run ids).
 */
function queuedStopParts(g: Guard, first: number): [string, string][] {
  const $ = (i: number) => `$${first + i}`;
  return [
    [
      "finals",
      `UPDATE runs SET status = f.status, record = f.record::json FROM unnest(${$(0)}::text[], ${$(1)}::text[], ${$(2)}::text[]) f(run_id, status, record)
  WHERE runs.run_id = f.run_id AND runs.thread_id = $1${g.and}`,
    ],
    [
      "hooks",
      `INSERT INTO webhook_outbox (thread_id, run_id, next_attempt_at, record, values_json)
  SELECT $1, h.run_id, h.next, h.record::json, h.v FROM unnest(${$(3)}::text[], ${$(4)}::text[], ${$(5)}::text[], ${$(6)}::bytea[]) h(run_id, next, record, v)${g.where}
  ON CONFLICT (thread_id, run_id) DO UPDATE SET next_attempt_at = EXCLUDED.next_attempt_at, record = EXCLUDED.record, values_json = EXCLUDED.values_json`,
    ],
    ["gone", `DELETE FROM runs WHERE thread_id = $1 AND run_id = ANY(${$(7)}::text[])${g.and}`],
  ];
}

/**
 * A run create that supersedes others (multitask interrupt/rollback): CREATE, plus the running
 * run's record with its recorded stop ($12 run_id, NULL: none; $13 status, $14 record) and the
 * queued runs it stopped ($15..$22, queuedStopParts).
 */
const CREATE_SUPERSEDING = createStatements(
  "troupe_run_create_superseding",
  (g) => [
    ["r", insertRun(g)],
    ["running", `UPDATE runs SET status = $13, record = $14::json WHERE run_id = $12 AND thread_id = $1${g.and}`],
    ...queuedStopParts(g, 15),
    ["t", upsertThreadSql(1, false, g.when)],
  ],
  23,
);

/** A queued run stopped on its own (cancel): $1 thread, its end at $2..$9 (queuedStopParts). */
const STOP_QUEUED = fencedStatements("troupe_run_stop_queued", (g) => queuedStopParts(g, 2));

/** The parameters of queuedStopParts for these stops. */
function queuedStopValues(stops: readonly QueuedStop[]): unknown[] {
  const finals = stops.flatMap((s) => ("final" in s ? [s] : []));
  const hooks = finals.flatMap((s) => (s.webhook ? [{ runId: s.final.run_id, d: deliveryValues(s.webhook) }] : []));
  return [
    finals.map((s) => s.final.run_id),
    finals.map((s) => s.final.status),
    textArray(finals.map((s) => recordText(s.final))),
    hooks.map((h) => h.runId),
    hooks.map((h) => h.d[0]),
    textArray(hooks.map((h) => h.d[1])),
    byteaArray(hooks.map((h) => h.d[2])),
    stops.flatMap((s) => ("rolledBack" in s ? [s.rolledBack.runId] : [])),
  ];
}

/** An existing run's record: $1 thread, $2 run, $3 status, $4 record. */
const SAVE = fencedStatements("troupe_run_save", (g) => [["s", `UPDATE runs SET status = $3, record = $4::json WHERE run_id = $2 AND thread_id = $1${g.and}`]]);

/**
 * $7 run_id, $8 status, $9 record (NULL: rolled back, the row goes), $10 whether to write the
 * values, $11 the values; $12-$14 the webhook delivery (deliveryValues; $13 NULL: none)
 */
const FINISH = fencedStatements("troupe_run_finish", (g) => [
  ["r", `UPDATE runs SET status = $8, record = $9::json WHERE run_id = $7 AND thread_id = $1 AND $9::json IS NOT NULL${g.and}`],
  ["d", `DELETE FROM runs WHERE run_id = $7 AND thread_id = $1 AND $9::json IS NULL${g.and}`],
  ["w", enqueueSql("$1", "$7", ["$12", "$13", "$14"], `$13::json IS NOT NULL${g.and}`)],
  [
    "t",
    `UPDATE threads SET status = $2, created_at = $3, updated_at = $4, metadata = $5::jsonb, record = $6::json,
    values_json = CASE WHEN $10::boolean THEN $11::bytea ELSE values_json END
  WHERE thread_id = $1${g.and}`,
  ],
]);

/** A run's end for a statement ending several (FINISH_MANY): FINISH's values, its fence. */
interface FinishItem {
  threadId: string;
  /** FINISH's $1-$14 */
  values: unknown[];
  fence: Fence | undefined;
}

// The finishes of a batch (write-chains.ts; a group's: several threads') as one statement: FINISH
// for each, each gated by its own fence (`held`: one array by item). One per thread
// (FINISH_MANY.accepts): two ends of one thread would update its row twice. The rows are found
// by `= ANY` of the ids (an index scan whatever the plan thought of the table's size: a join alone
// got a seq scan in the generic plan made while the tables were small).
const F_MANY_FINISH = fenceManySql(16, "§troupe_fence");
const FINISH_MANY_CTES = `
§items AS MATERIALIZED (
  SELECT u.thread_id, u.status, u.created_at, u.updated_at, u.metadata::jsonb AS metadata, u.record::json AS record, u.run_id, u.run_status,
    u.run_record::json AS run_record, u.values_json, u.next_attempt_at, u.hook_record::json AS hook_record, u.hook_values, u.epoch, u.ord::int AS ord
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::bytea[],
    $11::text[], $12::text[], $13::bytea[], $14::bigint[])
    WITH ORDINALITY u(thread_id, status, created_at, updated_at, metadata, record, run_id, run_status, run_record, values_json,
      next_attempt_at, hook_record, hook_values, epoch, ord)
), ${F_MANY_FINISH.cte}, §held AS MATERIALIZED (
  SELECT array_agg(${F_MANY_FINISH.holdsFor("i.thread_id", "i.epoch")} ORDER BY i.ord) AS h FROM §items i
), §r AS (
  UPDATE runs SET status = i.run_status, record = i.run_record FROM §items i
  WHERE runs.run_id = ANY($7::text[]) AND runs.run_id = i.run_id AND runs.thread_id = i.thread_id AND i.run_record IS NOT NULL AND (SELECT h FROM §held)[i.ord]
), §d AS (
  DELETE FROM runs USING §items i
  WHERE runs.run_id = ANY($7::text[]) AND runs.run_id = i.run_id AND runs.thread_id = i.thread_id AND i.run_record IS NULL AND (SELECT h FROM §held)[i.ord]
), §w AS (
  INSERT INTO webhook_outbox (thread_id, run_id, next_attempt_at, record, values_json)
  SELECT i.thread_id, i.run_id, i.next_attempt_at, i.hook_record, i.hook_values FROM §items i
  WHERE i.hook_record IS NOT NULL AND (SELECT h FROM §held)[i.ord]
  ON CONFLICT (thread_id, run_id) DO UPDATE SET next_attempt_at = EXCLUDED.next_attempt_at, record = EXCLUDED.record, values_json = EXCLUDED.values_json
), §t AS (
  UPDATE threads SET status = i.status, created_at = i.created_at, updated_at = i.updated_at, metadata = i.metadata, record = i.record,
    values_json = i.values_json
  FROM §items i WHERE threads.thread_id = ANY($1::text[]) AND threads.thread_id = i.thread_id AND (SELECT h FROM §held)[i.ord]
), §answer AS (
  SELECT i.ord, (SELECT h FROM §held)[i.ord] AS held FROM §items i
)`;

const FINISH_MANY: MergeKind<FinishItem> = {
  accepts: oncePerThread(),
  name: "troupe_run_finish_many",
  ctes: FINISH_MANY_CTES,
  answers: [],
  values(items): unknown[] {
    // the JSON and the values binary (binary-arrays.ts): they can be large; FINISH's $10 (values
    // given: always true) is left out
    return [
      ...arrayColumns(
        items.map((i) => i.values),
        ["plain", "plain", "plain", "plain", "text", "text", "plain", "plain", "text", undefined, "bytes", "plain", "text", "bytes"],
      ),
      items.map((i) => i.fence?.epoch ?? null),
      ...fenceManyValues(items.map((i) => i.fence)),
    ];
  },
};

/** A run whose thread was deleted while it ran: $1 thread, $2 run, $3-$5 its delivery ($4 NULL: none). */
const DISCARD = fencedStatements("troupe_run_discard", (g) => [
  ["d", `DELETE FROM runs WHERE thread_id = $1 AND run_id = $2${g.and}`],
  ["w", enqueueSql("$1", "$2", ["$3", "$4", "$5"], `$4::json IS NOT NULL${g.and}`)],
]);

/** A run deleted (DELETE /threads/{t}/runs/{r}) with its webhook outcome: $1 thread, $2 run. */
const DELETE_RUN = fencedStatements("troupe_run_delete", (g) => [
  ["o", `DELETE FROM webhook_outcomes WHERE thread_id = $1 AND run_id = $2${g.and}`],
  ["r", `DELETE FROM runs WHERE thread_id = $1 AND run_id = $2${g.and}`],
]);

export class PostgresRuns implements RunsPort {
  constructor(
    private readonly pool: pg.Pool,
    private readonly chains: ThreadWriteChains,
  ) {}

  async get(threadId: string, runId: string): Promise<RunRecord | undefined> {
    const r = await this.pool.query<RunRow>({ name: "troupe_run_get", text: `${SELECT} WHERE run_id = $2 AND thread_id = $1`, values: [threadId, runId] });
    return r.rows[0] === undefined ? undefined : toRun(r.rows[0]);
  }

  async exists(threadId: string, runId: string): Promise<boolean> {
    const r = await this.pool.query<{ found: boolean }>({
      name: "troupe_run_exists",
      text: "SELECT EXISTS (SELECT 1 FROM runs WHERE run_id = $2 AND thread_id = $1) AS found",
      values: [threadId, runId],
    });
    return r.rows[0].found;
  }

  async threadOf(runId: string): Promise<string | undefined> {
    const r = await this.pool.query<{ thread_id: string }>({
      name: "troupe_run_thread",
      text: "SELECT thread_id FROM runs WHERE run_id = $1",
      values: [runId],
    });
    return r.rows[0]?.thread_id;
  }

  async list(threadId: string, q: { status?: RunStatus; offset: number; limit: number }): Promise<RunRecord[]> {
    const r =
      q.status === undefined
        ? await this.pool.query<RunRow>(`${SELECT} WHERE thread_id = $1 ORDER BY run_id LIMIT $2 OFFSET $3`, [threadId, q.limit, q.offset])
        : await this.pool.query<RunRow>(`${SELECT} WHERE thread_id = $1 AND status = $4 ORDER BY run_id LIMIT $2 OFFSET $3`, [
            threadId,
            q.limit,
            q.offset,
            q.status,
          ]);
    return r.rows.map(toRun);
  }

  async latest(threadId: string): Promise<RunRecord | undefined> {
    const r = await this.pool.query<RunRow>(`${SELECT} WHERE thread_id = $1 ORDER BY run_id DESC LIMIT 1`, [threadId]);
    return r.rows[0] === undefined ? undefined : toRun(r.rows[0]);
  }

  async *active(threadId?: string): AsyncIterable<ActiveRun> {
    const runs = threadId === undefined ? this.walk(ACTIVE, []) : this.walk(`${ACTIVE} AND thread_id = $1`, [threadId]);
    // a run is active by its own status: never an entry without a record
    for await (const run of runs) yield { threadId: run.thread_id, runId: run.run_id, run };
  }

  ofAssistant(assistantId: string, threadId?: string): AsyncIterable<RunRecord> {
    return threadId === undefined ? this.walk("assistant_id = $1", [assistantId]) : this.walk("assistant_id = $1 AND thread_id = $2", [assistantId, threadId]);
  }

  /** matching runs in (thread_id, run_id) order, a batch per statement */
  private async *walk(where: string, values: unknown[]): AsyncIterable<RunRecord> {
    let after: [string, string] = ["", ""];
    for (;;) {
      const r = await this.pool.query<RunRow & { thread_id: string; run_id: string }>(walkStatement(where, values, after));
      for (const row of r.rows) yield toRun(row);
      if (r.rows.length < BATCH) return;
      const last = r.rows[r.rows.length - 1];
      after = [last.thread_id, last.run_id];
    }
  }

  /**
   * The run and the thread's next record, and (a run superseding others) the running run's record
   * with its recorded stop and the end of each queued run it stopped, in one statement. (`prev`:
   * the LMDB adapter's index diff; rows need none.) With `assistant` (a cached assistant's check),
   * written only if the assistant's row is still the one checked, else ASSISTANT_CHANGED.
   */
  create(c: {
    run: RunRecord;
    thread: ThreadRecord;
    prev?: ThreadRecord;
    running?: RunRecord;
    stopped?: readonly QueuedStop[];
    assistant?: AssistantCheck;
  }): Issued {
    const { run, assistant } = c;
    const values: unknown[] = [...threadRowValues(c.thread), run.run_id, run.assistant_id, run.status, recordText(run), jsonText(run.kwargs)];
    const plain = c.running === undefined && (c.stopped === undefined || c.stopped.length === 0);
    if (!plain)
      values.push(
        c.running?.run_id ?? null,
        c.running?.status ?? null,
        c.running === undefined ? null : recordText(c.running),
        ...queuedStopValues(c.stopped ?? []),
      );
    const statements = plain && c.prev !== undefined ? CREATE_ON_THREAD : plain ? CREATE : CREATE_SUPERSEDING;
    // several creates on existing threads in a batch (a group's, at load): one statement (its item reads $1-$11 of `values`)
    const fence = this.chains.fenceOf(run.thread_id);
    const merge = statements === CREATE_ON_THREAD ? mergeable(CREATE_ON_THREAD_MANY, () => ({ threadId: run.thread_id, values, assistant, fence })) : undefined;
    if (assistant !== undefined) values.push(...assistantCheckValues(assistant));
    const answer = (row: Record<string, unknown> | undefined) => {
      if (assistant !== undefined && row?.assistant_current !== true) throw assistantChanged(assistant.assistantId);
      if (statements === CREATE_ON_THREAD && row?.updated !== 1) throw threadNotFound(run.thread_id);
    };
    return { committed: this.chains.issueWrite(run.thread_id, assistant === undefined ? statements.unchecked : statements.checked, values, answer, merge) };
  }

  /** replaces an existing run's record: its start (running, attempt + 1), a stop recorded while it runs (cancel_reason) */
  save(run: RunRecord): Issued {
    const values = [run.thread_id, run.run_id, run.status, recordText(run)];
    return { committed: this.chains.issueWrite(run.thread_id, SAVE, values) };
  }

  /**
   * A queued run ended by a stop on its own (cancel): its end as `stop` says, and the thread's
   * record with `threadStatus` (read in the same transaction; nothing when the thread is gone).
   */
  stopQueued(threadId: string, stop: QueuedStop, threadStatus: ThreadStatus, now: string): Promise<void> {
    // fenced (cluster mode) as a whole: the fence check goes with the COMMIT
    return this.chains.transaction(this.pool, threadId, async (c) => {
      const found = await c.query<{ record: ThreadRecord }>("SELECT record FROM threads WHERE thread_id = $1 FOR UPDATE", [threadId]);
      await c.query({ ...STOP_QUEUED.plain, values: [threadId, ...queuedStopValues([stop])] });
      const thread = found.rows[0]?.record;
      if (thread !== undefined) await c.query(upsertThreadSql(1), threadRowValues({ ...thread, status: threadStatus, updated_at: now }));
    });
  }

  /** a run whose thread was deleted while it ran: its record goes; its webhook delivery is enqueued (one statement) */
  discard(key: RunKey, webhook?: WebhookDeliveryRecord): Promise<void> {
    const hook = webhook === undefined ? [null, null, null] : deliveryValues(webhook);
    return this.chains.issueWrite(key.threadId, DISCARD, [key.threadId, key.runId, ...hook]);
  }

  /** the run's end (its final record or removal), the thread's record and values (undefined: none), its webhook delivery: one statement */
  finish(end: {
    run: RunRecord | { rolledBack: RunKey };
    thread: ThreadRecord;
    prev?: ThreadRecord;
    valuesJson: Uint8Array | undefined;
    webhook?: WebhookDeliveryRecord;
  }): Issued {
    const run = "rolledBack" in end.run ? undefined : end.run;
    const key: RunKey = "rolledBack" in end.run ? end.run.rolledBack : { threadId: end.run.thread_id, runId: end.run.run_id };
    const values = [
      ...threadRowValues(end.thread),
      key.runId,
      run?.status ?? null,
      run === undefined ? null : recordText(run),
      true,
      end.valuesJson === undefined ? null : bytesParam(end.valuesJson),
      ...(end.webhook === undefined ? [null, null, null] : deliveryValues(end.webhook)),
    ];
    // several runs' ends in a batch (a group's, at load): one statement
    const fence = this.chains.fenceOf(key.threadId);
    return {
      committed: this.chains.issueWrite(
        key.threadId,
        FINISH,
        values,
        undefined,
        mergeable(FINISH_MANY, () => ({ threadId: key.threadId, values, fence })),
      ),
    };
  }

  delete(threadId: string, runId: string): Promise<void> {
    return this.chains.issueWrite(threadId, DELETE_RUN, [threadId, runId]);
  }

  /** Nothing to drop: a run is active by its own status (the partial index), never by a separate entry. */
  async dropActive(_key: RunKey): Promise<void> {}
}
