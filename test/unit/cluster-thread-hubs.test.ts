// The HTTP-thread hubs' cluster side (src/hub/remote-threads.ts uses it): relays, injected events,
// node-tagged thread-stream ids, mirrored protocol sessions, runs fed from another node.
import { describe, expect, it } from "vitest";
import { RunHub } from "../../src/hub/run-hub.ts";
import { ThreadProtocolHub, type ProtocolFrame } from "../../src/hub/thread-protocol-hub.ts";
import { ThreadStreamHub, THREAD_STREAM_MODES, type ThreadStreamEvent } from "../../src/hub/thread-stream-hub.ts";

const ALL = new Set(THREAD_STREAM_MODES);
const T = "thread-1";

function collect() {
  const got: ThreadStreamEvent[] = [];
  return { got, sub: { modes: ALL, onEvent: (e: ThreadStreamEvent) => got.push(e), onClose: () => undefined } };
}

describe("ThreadStreamHub in a cluster", () => {
  it("injected events reach clients, not relays; local events reach both", () => {
    const hub = new ThreadStreamHub();
    const client = collect();
    const relay = collect();
    hub.subscribe(T, undefined, client.sub);
    hub.subscribe(T, undefined, { ...relay.sub, relay: true });
    hub.inject(T, "lifecycle", "run_start", "{}");
    hub.publish(T, "run_modes", "values", "{}");
    expect(client.got.map((e) => e.event)).toEqual(["run_start", "values"]);
    expect(relay.got.map((e) => e.event)).toEqual(["values"]);
  });

  it("tagged ids: a Last-Event-ID of this node replays, one of another node replays nothing", () => {
    const hub = new ThreadStreamHub();
    hub.tagIds(5, 8192);
    hub.subscribe(T, undefined, collect().sub);
    for (let i = 0; i < 3; i++) hub.publish(T, "run_modes", "values", `{"i":${i}}`);
    const first = collect();
    hub.subscribe(T, -1, first.sub);
    expect(first.got.every((e) => e.id % 8192 === 5)).toBe(true);
    const own = collect();
    hub.subscribe(T, first.got[0].id, own.sub);
    expect(own.got.map((e) => e.data)).toEqual(['{"i":1}', '{"i":2}']);
    const foreign = collect();
    hub.subscribe(T, first.got[0].id + 1, foreign.sub); // another node's tag
    expect(foreign.got).toEqual([]);
  });

  it("a channel kept by relays alone holds only the newest event, and a client coming later starts clean", () => {
    const hub = new ThreadStreamHub();
    hub.subscribe(T, undefined, { ...collect().sub, relay: true });
    for (let i = 0; i < 5; i++) hub.publish(T, "run_modes", "values", `{"i":${i}}`);
    expect(hub.heldForClients(T, Date.now())).toBe(false);
    const late = collect();
    const unsubscribe = hub.subscribe(T, -1, late.sub);
    expect(late.got).toEqual([]);
    expect(hub.heldForClients(T, Date.now())).toBe(true);
    hub.publish(T, "run_modes", "values", "{}");
    unsubscribe();
    expect(hub.heldForClients(T, Date.now())).toBe(true); // a reconnect may still resume
    expect(hub.heldForClients(T, Date.now() + 61_000)).toBe(false);
  });
});

const frame = (seq: number, method: string, data: object, namespace: string[] = []): ProtocolFrame => ({
  seq,
  method,
  channel: method,
  namespace,
  data: JSON.stringify({ event_id: String(seq), seq, type: "event", method, params: { namespace, data } }),
});

describe("ThreadProtocolHub in a cluster", () => {
  it("mirrors another node's session: its seqs kept, repeats dropped, an older run ignored, a newer one starts over", () => {
    const hub = new ThreadProtocolHub();
    const got: number[] = [];
    hub.subscribe(T, undefined, { filter: { channels: ["lifecycle", "values"] }, onEvent: (f) => got.push(f.seq), onClose: () => undefined });
    hub.inject(T, "run-2", "node-a", frame(100, "lifecycle", { event: "started", graph_name: "g" }));
    hub.inject(T, "run-2", "node-a", frame(101, "values", {}));
    hub.inject(T, "run-2", "node-a", frame(101, "values", {})); // a replay for a new watcher
    hub.inject(T, "run-1", "node-a", frame(50, "values", {})); // an older run
    expect(got).toEqual([100, 101]);
    expect(hub.lastSeq(T)).toBe(101);
    expect(hub.tree(T)).toMatchObject({ namespace: [], status: "started", graph_name: "g" });
    hub.inject(T, "run-3", "node-c", frame(7, "values", {}));
    expect(hub.sessionRun(T)).toBe("run-3");
    expect(got).toEqual([100, 101, 7]);
  });

  it("relays get every local frame whatever their filter, never injected ones", () => {
    const hub = new ThreadProtocolHub();
    const relayed: number[] = [];
    hub.subscribe(T, undefined, { relay: true, filter: { channels: [] }, onEvent: (f) => relayed.push(f.seq), onClose: () => undefined });
    hub.adopt(T, "run-1");
    hub.publish(T, "run-1", [{ id: 0, event: JSON.stringify(["custom:x", "custom:x", []]), data: '{"type":"event"}' }]);
    hub.inject(T, "run-1", "node-a", frame(1, "values", {}));
    expect(relayed).toHaveLength(1);
    expect(hub.listenerCount(T)).toBe(0);
  });

  it("a run adopted here that ended on another node stops running when nothing of it was mirrored", () => {
    const hub = new ThreadProtocolHub({ retentionMs: 0 });
    hub.adopt(T, "run-1");
    hub.settled(T, "run-1");
    const { unsubscribe } = hub.subscribe(T, undefined, { filter: { channels: ["values"] }, onEvent: () => undefined, onClose: () => undefined });
    unsubscribe(); // not running: the session goes with its last listener
    expect(hub.size).toBe(0);
  });

  it("each protocol run's seqs start past the clock (another node's numbering never repeats them)", () => {
    const hub = new ThreadProtocolHub();
    const before = Date.now() * 1000;
    hub.adopt(T, "run-1");
    hub.announce(T, "lifecycle", "lifecycle", { event: "started" });
    expect(hub.lastSeq(T)!).toBeGreaterThan(before);
  });
});

describe("RunHub: runs fed from another node", () => {
  it("go to their own readers, not to this node's thread streams or protocol sessions", () => {
    const hub = new RunHub();
    const thread = collect();
    hub.threads.subscribe(T, undefined, thread.sub);
    const read: string[] = [];
    hub.subscribe("run-r", "start", { onEvent: (e) => read.push(e.event), onDone: () => read.push("done") });
    hub.expect("run-r", T, false);
    hub.events("run-r", [{ id: 0, event: "metadata", data: "{}" }], true);
    hub.finished({ runId: "run-r", threadId: T, status: "success", threadStatus: "idle" }, true);
    expect(read).toEqual(["metadata", "done"]);
    expect(thread.got).toEqual([]);

    hub.started("run-l", T, false, 1);
    hub.events("run-l", [{ id: 0, event: "metadata", data: "{}" }]);
    hub.finished({ runId: "run-l", threadId: T, status: "success", threadStatus: "idle" });
    expect(thread.got.map((e) => e.event)).toEqual(["run_start", "metadata", "run_end"]);
  });
});
