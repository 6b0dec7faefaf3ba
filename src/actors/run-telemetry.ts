// A run's start and end, as the operator sees them: a log line each (run, thread, assistant,
// graph, attempt, queue wait, status, duration, error) and the shard's run counters on the shared
// metrics board (src/bridge/shard-metrics.ts).
import type { RunRecord } from "../storage/records.ts";
import { RUN_END_STATUSES, type RunEndStatus, type ShardMetricsWriter } from "../bridge/shard-metrics.ts";
import { componentLog, type ComponentLog } from "../log/logger.ts";

export class RunTelemetry {
  constructor(
    private readonly board: ShardMetricsWriter | undefined,
    private readonly log: ComponentLog = componentLog("runs"),
  ) {}

  /** `running`: the run's record as it starts (status running, attempt and started_at set) */
  started(running: RunRecord): void {
    const startedAt = Date.parse(running.started_at ?? running.updated_at);
    const waitMs = Math.max(0, startedAt - Date.parse(running.created_at));
    this.board?.runStarted(running.graph_id, waitMs);
    this.log.info("run started", { ...ids(running), queue_wait_ms: waitMs });
  }

  /** `final`: the run's record as it ended (a run cancelled while pending has no started_at) */
  ended(final: RunRecord): void {
    const status = final.status as RunEndStatus;
    if (!RUN_END_STATUSES.includes(status)) return;
    const durationMs = final.started_at === undefined ? undefined : Math.max(0, Date.parse(final.ended_at ?? final.updated_at) - Date.parse(final.started_at));
    this.board?.runEnded(final.graph_id, status, durationMs);
    const fields = { ...ids(final), status, duration_ms: durationMs, ...(final.error ? { error: final.error } : {}) };
    if (status === "error") this.log.warn("run failed", fields);
    else this.log.info("run finished", fields);
  }
}

function ids(run: RunRecord) {
  return { run_id: run.run_id, thread_id: run.thread_id, assistant_id: run.assistant_id, graph_id: run.graph_id, attempt: run.attempt };
}
