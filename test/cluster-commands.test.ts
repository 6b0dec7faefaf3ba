// Forwarded commands on a real PostgreSQL: a node (its own pool and bus) sends commands to
// another, which runs them in the order sent and replies; large bodies both ways; errors come back
// as errors; a command nobody took is withdrawn (safe to resend), and commands that arrived while
// the owner's LISTEN session was down are still taken once it is back.
import { ClusterCommands, type CommandHandler } from "../src/cluster/commands.ts";
import { NotifyBus } from "../src/cluster/bus.ts";
import { TroupeError } from "../src/errors.ts";
import { useClusterDatabase } from "./helpers/cluster.ts";
import { waitUntil } from "./helpers/wait.ts";

const cluster = useClusterDatabase();
const closers: (() => Promise<void>)[] = [];
let nodes = 0;
const newNodeId = () => `n${process.pid}-${++nodes}`;

afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function startNode(
  handle: CommandHandler,
  opts: { minBackoffMs?: number; nodeId?: string } = {},
): Promise<{ nodeId: string; bus: NotifyBus; commands: ClusterCommands }> {
  const nodeId = opts.nodeId ?? newNodeId();
  const db = cluster.open();
  const bus = new NotifyBus(db, { cleanupEveryMs: 0, minBackoffMs: opts.minBackoffMs });
  await bus.start();
  const commands = new ClusterCommands(db, bus, { nodeId, handle });
  await commands.start();
  closers.push(
    () => bus.close(),
    () => commands.close(),
  );
  return { nodeId, bus, commands };
}

test("commands sent one after another run on the owner in that order (also those waiting for it to start); replies, large ones too, come back to each sender", async () => {
  const ran: string[] = [];
  const a = await startNode(async () => "unused");
  const b = await startNode(async () => "unused");
  const ownerId = newNodeId();
  const sentByA: Promise<unknown>[] = [];
  const send = async (i: number) => {
    // each is committed before the next is sent (replies not awaited): the owner must run them in this order
    const body = i % 7 === 6 ? `a${i}-${"x".repeat(9_000)}` : `a${i}`;
    const sent = await a.commands.send(ownerId, body);
    sentByA.push(sent.reply(20_000));
  };
  for (let i = 0; i < 10; i++) await send(i); // the owner is not up yet: these wait as rows
  const owner = await startNode(
    async (body, from) => {
      ran.push(body);
      return `${from}:${body}:${body.length > 10 ? "L".repeat(20_000) : "done"}`;
    },
    { nodeId: ownerId },
  );
  for (let i = 10; i < 20; i++) await send(i);
  const replyB = await b.commands.forward(owner.nodeId, "b0", 20_000);
  expect(replyB).toEqual({ status: "replied", body: `${b.nodeId}:b0:done` });
  const replies = await Promise.all(sentByA);
  for (const [i, reply] of replies.entries()) {
    const body = i % 7 === 6 ? `a${i}-${"x".repeat(9_000)}` : `a${i}`;
    expect(reply).toEqual({ status: "replied", body: `${a.nodeId}:${body}:${body.length > 10 ? "L".repeat(20_000) : "done"}` });
  }

  const fromA = ran.filter((r) => r.startsWith("a")).map((r) => r.split("-")[0]);
  expect(fromA).toEqual(Array.from({ length: 20 }, (_, i) => `a${i}`));
});

test("a failing command replies with its error code and message", async () => {
  const owner = await startNode(async (body) => {
    throw new TroupeError("CONFLICT", `thread busy: ${body}`);
  });
  const sender = await startNode(async () => "unused");
  const result = await sender.commands.forward(owner.nodeId, "x", 20_000);
  expect(result).toMatchObject({ status: "failed", error: { code: "CONFLICT", message: "thread busy: x" } });
});

test("a command to a node that never takes it is withdrawn after the timeout (not-taken), leaving no row", async () => {
  const sender = await startNode(async () => "unused");
  const result = await sender.commands.forward("nobody-home", "x", 300);
  expect(result).toEqual({ status: "not-taken" });
  const rows = await cluster.open(1).pool.query("SELECT 1 FROM cluster_commands WHERE target_node = 'nobody-home'");
  expect(rows.rowCount).toBe(0);
});

test("commands sent while the owner's LISTEN session is down are taken once it is back", async () => {
  const ran: string[] = [];
  const owner = await startNode(
    async (body) => {
      ran.push(body);
      return `ok ${body}`;
    },
    { minBackoffMs: 1_000 },
  );
  const sender = await startNode(async () => "unused");
  const admin = cluster.open(1);
  const pid = await owner.bus.listenerPid();
  await admin.pool.query("SELECT pg_terminate_backend($1)", [pid]);
  await waitUntil(async () => (await admin.pool.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", [pid])).rowCount === 0, { what: "the session gone" });
  // the doorbell rings while nobody listens; the row waits, and the reconnect's look finds it
  const reply = await sender.commands.forward(owner.nodeId, "during-outage", 30_000);
  expect(reply).toEqual({ status: "replied", body: "ok during-outage" });
  expect(ran).toEqual(["during-outage"]);
});
