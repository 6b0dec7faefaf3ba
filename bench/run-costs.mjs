// Summary for bench/run-costs.sh: CPU per run by thread kind (from /proc snapshots), Postgres CPU,
// statements per run by kind and NOTIFYs per run by channel kind (from the PostgreSQL log written
// with log_min_duration_statement = 0 during the measured window).
// usage: node bench/run-costs.mjs LABEL RUNS SNAPSHOT_BEFORE SNAPSHOT_AFTER LOG_SLICE PG_TICKS_BEFORE PG_TICKS_AFTER TID_DIR "PID ..." [top=25]
import { readFileSync } from "node:fs";

const [label, runsArg, before, after, logSlice, pg0, pg1, tidDir, pidList, topArg] = process.argv.slice(2);
const runs = Number(runsArg);
const ticksPerSecond = 100; // getconf CLK_TCK on Linux
const msPerRun = (ticks) => ((1000 * ticks) / ticksPerSecond / runs).toFixed(2);

const snapshot = (file) =>
  new Map(
    readFileSync(file, "utf8")
      .trim()
      .split("\n")
      .map((line) => {
        const [pid, tid, ticks, voluntary, involuntary] = line.split(" ");
        return [`${pid}/${tid}`, { ticks: Number(ticks), voluntary: Number(voluntary ?? 0), involuntary: Number(involuntary ?? 0) }];
      }),
  );
const a = snapshot(before);
const b = snapshot(after);
const kindOf = new Map();
for (const pid of pidList.split(" ")) {
  try {
    for (const line of readFileSync(`${tidDir}/tids-${pid}.txt`, "utf8").trim().split("\n")) {
      const [tid, kind] = line.split(" ");
      kindOf.set(`${pid}/${tid}`, kind === "main" ? "main" : "shards");
    }
  } catch {
    // no preload output: the process's threads count as other
  }
}
const byKind = { main: 0, shards: 0, other: 0 };
const byProcess = new Map();
const switches = { voluntary: 0, involuntary: 0 };
for (const [key, now] of b) {
  const was = a.get(key) ?? { ticks: 0, voluntary: 0, involuntary: 0 };
  const spent = now.ticks - was.ticks;
  switches.voluntary += now.voluntary - was.voluntary;
  switches.involuntary += now.involuntary - was.involuntary;
  const [pid, tid] = key.split("/");
  byKind[pid === tid ? "main" : (kindOf.get(key) ?? "other")] += spent;
  byProcess.set(pid, (byProcess.get(pid) ?? 0) + spent);
}

const lines = readFileSync(logSlice, "utf8").split("\n");
const kinds = new Map();
const notifyChannels = new Map();
let statements = 0;
let notifies = 0;
for (let i = 0; i < lines.length; i++) {
  const m = /duration: [\d.]+ ms {2}(execute [^:]*|statement): (.*)$/.exec(lines[i]);
  if (!m) continue;
  statements++;
  // "execute <unnamed>": a statement parsed (and planned) for this execution only; "statement": simple protocol
  let sql = (m[1] === "execute <unnamed>" ? "[unnamed] " : m[1] === "statement" ? "[simple] " : "") + m[2];
  let j = i + 1;
  for (; j < lines.length && lines[j].startsWith("\t"); j++) sql += ` ${lines[j].trim()}`;
  let kind = sql.replace(/\s+/g, " ").trim().slice(0, 70);
  if (/pg_notify/.test(sql)) {
    notifies++;
    const channel = /\$1 = '([^']*)'/.exec(lines[j] ?? "")?.[1] ?? "?";
    const channelKind = channel.replace(/^[^_]*_/, "").replace(/\..*/, ""); // schema hash, then run. / thread. / ...
    notifyChannels.set(channelKind, (notifyChannels.get(channelKind) ?? 0) + 1);
    kind = `pg_notify on ${channelKind}`;
  }
  kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
}
const perRun = (n) => (n / runs).toFixed(3);
console.log(
  `${label}: ${runs} runs; CPU ms per run: total ${msPerRun(byKind.main + byKind.shards + byKind.other)}, main ${msPerRun(byKind.main)}, ` +
    `shards ${msPerRun(byKind.shards)}, other ${msPerRun(byKind.other)}; per process ${[...byProcess.values()].map(msPerRun).join(" ")}; ` +
    `context switches per run ${(switches.voluntary / runs).toFixed(1)} voluntary, ${(switches.involuntary / runs).toFixed(1)} involuntary; ` +
    `postgres ${msPerRun(Number(pg1) - Number(pg0))}; statements per run ${perRun(statements)}, NOTIFY statements per run ${perRun(notifies)}` +
    (notifyChannels.size ? ` (${[...notifyChannels].map(([k, v]) => `${k} ${perRun(v)}`).join(", ")})` : ""),
);
for (const [kind, n] of [...kinds].sort((x, y) => y[1] - x[1]).slice(0, Number(topArg ?? 25))) console.log(`  ${perRun(n)}  ${kind}`);
