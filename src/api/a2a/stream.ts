// SendStreamingMessage / message/stream: turns a run's event stream into A2A SSE events —
// the Task (submitted), status updates while it works (with streamed AI text), then the
// "Assistant Response" artifact and a final status update built from the stored outcome.
import type { RunEvent, RunDone } from "../../bridge/messages.ts";
import type { RunStreams } from "../../hub/run-hub.ts";
import type { SseReply } from "../../http/types.ts";
import type { StoragePort } from "../../storage/port.ts";
import type { RunRecord, ThreadView } from "../../storage/records.ts";
import { encodeMessage, kind, stateName, streamResult, textPart, type Dialect } from "./dialects.ts";
import { textOf } from "./messages.ts";
import { artifactOf, buildTask, encodeStatus, loadTask, taskState, type HistoryOptions, type TaskSource } from "./task.ts";
import { isRecord, rpcResult, type RpcId } from "../jsonrpc.ts";

export interface TaskStreamInput {
  storage: StoragePort;
  runs: RunStreams;
  run: RunRecord;
  /** the run's thread as the stream starts (viewOf, read before the reply) */
  thread: ThreadView | undefined;
  dialect: Dialect;
  rpcId: RpcId;
  history: HistoryOptions;
}

export function taskStream(s: TaskStreamInput): SseReply {
  const { run, dialect: d } = s;
  const ids = { taskId: run.run_id, contextId: run.thread_id };
  const frame = (type: "task" | "status-update" | "artifact-update", obj: Record<string, unknown>) =>
    `data: ${JSON.stringify(rpcResult(s.rpcId, streamResult(d, type, obj)))}\n\n`;
  const statusUpdate = (status: Record<string, unknown>, final: boolean) => frame("status-update", { ...kind(d, "status-update"), ...ids, status, final });

  return {
    kind: "sse",
    start(sink) {
      sink.write(frame("task", buildTask(d, { run, thread: s.thread, latest: true }, s.history)));
      let working = false;
      const markWorking = () => {
        if (working) return;
        working = true;
        sink.write(statusUpdate({ state: stateName(d, "working"), timestamp: new Date().toISOString() }, false));
      };
      return s.runs.subscribe(run.run_id, "start", {
        onEvent(e: RunEvent) {
          if (e.event === "metadata") return markWorking();
          if (e.event !== "messages") return;
          markWorking();
          const [chunk] = JSON.parse(e.data) as [unknown, unknown];
          if (!isRecord(chunk) || !/^ai/i.test(String(chunk.type ?? ""))) return;
          const text = textOf(chunk.content);
          if (!text) return;
          const message = encodeMessage(d, {
            messageId: typeof chunk.id === "string" ? chunk.id : `${run.run_id}-${e.id}`,
            role: "agent",
            parts: [textPart(d, text)],
            ...ids,
          });
          sink.write(statusUpdate({ state: stateName(d, "working"), message, timestamp: new Date().toISOString() }, false));
        },
        onDone(done: RunDone) {
          const end = (stored: TaskSource | undefined) => {
            const src: TaskSource = stored ?? { run: { ...run, status: done.status }, thread: undefined, latest: true };
            const state = taskState(src);
            if (state === "completed")
              sink.write(frame("artifact-update", { ...kind(d, "artifact-update"), ...ids, artifact: artifactOf(d, src), append: false, lastChunk: true }));
            sink.write(statusUpdate(encodeStatus(d, src, state), true));
            sink.end();
          };
          void loadTask(s.storage, run.run_id, run.thread_id).then(end, () => end(undefined));
        },
      });
    },
  };
}
