// The NOTIFY bus on a real PostgreSQL: across real processes (each with its own pool and LISTEN
// session) every subscriber gets every publisher's messages in publish order, large bodies
// through the payload table intact; a dropped LISTEN session is reopened and resubscribed, and
// what may have been missed meanwhile is reported, never silently skipped.
import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { NotifyBus, type BusGap, type BusMessage } from "../src/cluster/bus.ts";
import { channelName, INLINE_LIMIT_BYTES } from "../src/cluster/bus-envelope.ts";
import { ManualClock } from "../src/util/clock.ts";
import { messageBody } from "./fixtures/cluster/bus-messages.ts";
import { useClusterDatabase } from "./helpers/cluster.ts";
import { REPO } from "./helpers/server.ts";
import { waitUntil } from "./helpers/wait.ts";

const cluster = useClusterDatabase();
const buses: NotifyBus[] = [];
let channels = 0;
const newChannel = () => channelName("public", "test", `${process.pid}-${++channels}`);

afterEach(async () => {
  await Promise.all(buses.splice(0).map((b) => b.close()));
});

async function startBus(opts: ConstructorParameters<typeof NotifyBus>[1] = {}): Promise<NotifyBus> {
  const bus = new NotifyBus(cluster.open(), { cleanupEveryMs: 0, ...opts });
  buses.push(bus);
  await bus.start();
  return bus;
}

interface Child {
  proc: ChildProcess;
  lines: string[];
  exited: Promise<number | null>;
}

function child(args: string[]): Child {
  const proc = spawn(process.execPath, ["--import", "tsx", join(REPO, "test/fixtures/cluster/bus-node.ts"), ...args], {
    cwd: REPO,
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines: string[] = [];
  createInterface({ input: proc.stdout! }).on("line", (l) => lines.push(l));
  const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
  return { proc, lines, exited };
}

test("two publisher processes, two listener processes: every listener gets every message, each publisher's in order, large ones intact", async () => {
  const channel = newChannel();
  const perPublisher = 300;
  const total = 2 * perPublisher;
  const listeners = [child(["listen", cluster.uri, channel, String(total)]), child(["listen", cluster.uri, channel, String(total)])];
  try {
    await waitUntil(() => listeners.every((l) => l.lines.includes("ready")), { timeoutMs: 60_000, what: "the listener processes subscribed" });
    const publishers = [
      child(["publish", cluster.uri, channel, String(perPublisher), "p1"]),
      child(["publish", cluster.uri, channel, String(perPublisher), "p2"]),
    ];
    expect(await Promise.all(publishers.map((p) => p.exited))).toEqual([0, 0]);
    expect(publishers.map((p) => p.lines)).toEqual([["done"], ["done"]]);
    expect(await Promise.all(listeners.map((l) => l.exited))).toEqual([0, 0]);
    for (const l of listeners) {
      const result = JSON.parse(l.lines[1]) as { got: { stream: string; seq: number; head: string; length: number; digest: string }[]; gaps: unknown[] };
      expect(result.gaps).toEqual([]);
      for (const publisher of ["p1", "p2"]) {
        const mine = result.got.filter((m) => m.head.startsWith(`${publisher}:`));
        // in publish order, none missing, none twice, bodies as sent
        expect(mine.map((m) => m.head)).toEqual(Array.from({ length: perPublisher }, (_, i) => `${publisher}:${i}`));
        expect(new Set(mine.map((m) => m.stream)).size).toBe(1);
        expect(mine.map((m) => m.seq)).toEqual(Array.from({ length: perPublisher }, (_, i) => mine[0].seq + i));
        for (const [i, m] of mine.entries()) {
          const body = messageBody(publisher, i);
          expect(m).toMatchObject({ length: body.length, digest: createHash("sha1").update(body).digest("hex") });
        }
      }
    }
  } finally {
    for (const l of listeners) l.proc.kill("SIGKILL");
  }
}, 120_000);

test("bodies up to the inline limit go in the notification, larger ones (any script) through the payload table, which is cleaned up by age", async () => {
  const publisher = await startBus({ payloadRetentionMs: 0 });
  const subscriber = await startBus();
  const channel = newChannel();
  const got: BusMessage[] = [];
  await subscriber.subscribe(channel, { message: (m) => got.push(m) });
  const bodies = [
    "small",
    "a".repeat(INLINE_LIMIT_BYTES),
    "a".repeat(INLINE_LIMIT_BYTES + 1),
    "ü".repeat(INLINE_LIMIT_BYTES / 2 + 1),
    "🎭".repeat(100_000),
    "",
  ];
  const payloadsBefore = await payloadCount(channel);
  await Promise.all(bodies.map((b) => publisher.publish(channel, b)));
  // 3 bodies exceed 7000 bytes of UTF-8: only those were stored
  expect(await payloadCount(channel)).toBe(payloadsBefore + 3);
  await waitUntil(() => got.length === bodies.length, { what: "every body delivered" });
  expect(got.map((m) => m.body)).toEqual(bodies);
  expect(await publisher.cleanupPayloads()).toBeGreaterThanOrEqual(3);
  expect(await payloadCount(channel)).toBe(0);
});

async function payloadCount(channel: string): Promise<number> {
  const result = await cluster.open(1).pool.query<{ n: number }>("SELECT count(*)::int AS n FROM cluster_payloads WHERE channel = $1", [channel]);
  return result.rows[0].n;
}

test("a dropped LISTEN session is reopened and resubscribed: the reconnect and the message lost meanwhile are reported, later ones delivered", async () => {
  const clock = new ManualClock();
  const subscriber = await startBus({ clock, reorderMs: 2_000, minBackoffMs: 100 });
  const publisher = await startBus();
  const channel = newChannel();
  const other = newChannel();
  const events: (BusMessage | BusGap)[] = [];
  const otherEvents: (BusMessage | BusGap)[] = [];
  await subscriber.subscribe(channel, { message: (m) => events.push(m), gap: (g) => events.push(g) });
  await subscriber.subscribe(other, { message: (m) => otherEvents.push(m), gap: (g) => otherEvents.push(g) });
  await publisher.publish(channel, "m1");
  await waitUntil(() => events.length === 1, { what: "m1" });

  const admin = cluster.open(1);
  const pid = await subscriber.listenerPid();
  await admin.pool.query("SELECT pg_terminate_backend($1)", [pid]);
  await waitUntil(async () => (await admin.pool.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", [pid])).rowCount === 0, { what: "the session gone" });
  await publisher.publish(channel, "m2"); // nobody listens on this node right now: lost here
  await clock.advance(100); // the reconnect's backoff
  await waitUntil(() => events.length === 2, { what: "the reconnect reported" });
  expect(await subscriber.listenerPid()).not.toBe(pid);

  await publisher.publish(channel, "m3");
  await publisher.publish(other, "o1");
  await waitUntil(() => otherEvents.some((e) => "body" in e), { what: "o1 (resubscribed)" });
  // m3 waits for m2 until the reorder window passes, then the hole is reported and m3 delivered
  expect(events).toHaveLength(2);
  await clock.advance(2_000);
  await waitUntil(() => events.length === 4, { what: "the hole and m3" });
  const stream = (events[0] as BusMessage).stream;
  expect(events).toEqual([
    { body: "m1", stream, seq: 1 },
    { reason: "reconnect" },
    { reason: "sequence", stream, from: 2, to: 2 },
    { body: "m3", stream, seq: 3 },
  ]);
  expect(otherEvents).toEqual([{ reason: "reconnect" }, { body: "o1", stream: expect.any(String), seq: 1 }]);
});

test("an unsubscribed handler gets nothing more; other subscribers of the channel keep theirs, and a new one gets what follows", async () => {
  const bus = await startBus();
  const publisher = await startBus();
  const channel = newChannel();
  const a: string[] = [];
  const b: string[] = [];
  const c: string[] = [];
  const unsubA = await bus.subscribe(channel, { message: (m) => a.push(m.body) });
  const unsubB = await bus.subscribe(channel, { message: (m) => b.push(m.body) });
  await publisher.publish(channel, "1");
  await waitUntil(() => a.length === 1 && b.length === 1, { what: "both got 1" });
  await unsubA();
  await publisher.publish(channel, "2");
  await waitUntil(() => b.length === 2, { what: "b got 2" });
  await unsubB(); // the last one: the channel is unlistened
  await publisher.publish(channel, "3");
  await bus.subscribe(channel, { message: (m) => c.push(m.body) });
  await publisher.publish(channel, "4");
  await waitUntil(() => c.length > 0, { what: "c got 4" });
  expect(a).toEqual(["1"]);
  expect(b).toEqual(["1", "2"]);
  expect(c).toEqual(["4"]);
});

test("a message whose payload row is gone is reported missing and its stream goes on; a malformed notification is reported as an error", async () => {
  const errors: unknown[] = [];
  const bus = await startBus({ onError: (e) => errors.push(e) });
  const channel = newChannel();
  const events: (BusMessage | BusGap)[] = [];
  await bus.subscribe(channel, { message: (m) => events.push(m), gap: (g) => events.push(g) });
  // what another node's publisher sends, by hand: seq 1 inline, seq 2 naming a removed row, seq 3 inline
  const db = cluster.open(1);
  await db.pool.query("SELECT pg_notify($1, $2)", [channel, "ext 1 ifirst"]);
  await db.pool.query("SELECT pg_notify($1, $2)", [channel, "ext 2 p987654321"]);
  await db.pool.query("SELECT pg_notify($1, $2)", [channel, "ext 3 ithird"]);
  await db.pool.query("SELECT pg_notify($1, $2)", [channel, "not an envelope"]);
  await waitUntil(() => events.length === 3 && errors.length === 1, { what: "three events and one error" });
  expect(events).toEqual([
    { body: "first", stream: "ext", seq: 1 },
    { reason: "payload-missing", stream: "ext", seq: 2 },
    { body: "third", stream: "ext", seq: 3 },
  ]);
  expect(String(errors[0])).toMatch(/malformed notification/);
});
