#!/bin/bash
# Per-run costs of a Postgres-backed server or cluster under one bench scenario (issue 22): CPU per
# run by thread (main/HTTP thread, actor shards, other: V8/libuv helpers and the webhook worker),
# the PostgreSQL server's CPU, statements per run by kind and NOTIFYs per run by channel (every
# statement logged for the bench's database: log_min_duration_statement = 0). Fresh database and
# servers each time; a warm-up (WARM s) before the measured window. Linux only (/proc).
#
# usage: PGU=ADMIN_URI PGLOG=SERVER_LOG bench/run-costs.sh CHECKOUT LABEL NODES [DURATION=8]
#   env: SC scenario (wait-c64), WARM warm-up seconds (3), SERVE_ARGS extra `troupe serve` args,
#        PROFDIR: CPU profiles of the first node (main thread and shards) go there,
#        STATEMENT_LOG=0: no statement log (logging every statement with its parameters costs
#        PostgreSQL CPU of its own: the server's CPU per run is truer without; no statement counts then)
#   PGU/PGLOG: a local PostgreSQL on this machine, e.g. `npx tsx bench/local-postgres.ts --port 55433`
#   (it prints both); alternate checkouts and take medians: CPU per run is steadier than throughput.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
co=$(realpath "$1"); label=$2; nodes=$3; duration=${4:-8}; sc=${SC:-wait-c64}
PGU=${PGU:?admin uri}; PGLOG=${PGLOG:?the PostgreSQL server log}
pgpid=$(head -1 "$(dirname "$PGLOG")/data/postmaster.pid")
work=$(mktemp -d /tmp/troupe-run-costs-XXXX)
db=costs_$$_$RANDOM
uri=$(node "$here/bench/pg-admin.mjs" create "$PGU" $db)
node -e 'const pg=require(process.argv[1]);const c=new pg.Client(process.argv[2]);c.connect().then(()=>c.query(process.argv[3])).then(()=>c.end())' \
  "$here/node_modules/pg" "$PGU" "ALTER DATABASE $db SET log_min_duration_statement = $([ "${STATEMENT_LOG:-1}" = 0 ] && echo -1 || echo 0)"
# PG_DB_SET="name = value": one more setting of the bench's database (an experiment, e.g. plan_cache_mode = force_generic_plan)
[ -n "${PG_DB_SET:-}" ] && node -e 'const pg=require(process.argv[1]);const c=new pg.Client(process.argv[2]);c.connect().then(()=>c.query(process.argv[3])).then(()=>c.end())' \
  "$here/node_modules/pg" "$PGU" "ALTER DATABASE $db SET $PG_DB_SET"
pids=(); logs=(); urls=()
for i in $(seq 1 "$nodes"); do
  d=$(mktemp -d "$work/node-XXXX"); ids=""; [ "$nodes" -gt 1 ] && ids="--node-id n$i"
  prof=""; [ -n "${PROFDIR:-}" ] && [ "$i" = 1 ] && prof=$PROFDIR
  (cd "$co" && TID_DIR=$work NODE_OPTIONS="--require $here/bench/thread-ids.cjs" exec env ${prof:+TROUPE_CPU_PROFILE_DIR=$prof} node ${prof:+--cpu-prof --cpu-prof-dir=$prof} \
    bin/troupe.js serve --host 127.0.0.1 --config examples/service.json --rate-limit off --port 0 --data-dir "$d" --database-uri "$uri" $ids ${SERVE_ARGS:-} > "$d.log" 2>&1) &
  pids+=($!); logs+=("$d.log")
done
for l in "${logs[@]}"; do for _ in $(seq 1 600); do u=$(grep -o 'http://127.0.0.1:[0-9]*' "$l" | head -1); [ -n "$u" ] && break; sleep 0.1; done; urls+=("$u"); done
for _ in $(seq 1 100); do
  n=$(curl -s "${urls[0]}/info" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{try{console.log(JSON.parse(s).nodes_alive)}catch{console.log(0)}})')
  [ "$n" = "$nodes" ] && break; sleep 0.5
done
list=$(IFS=,; echo "${urls[*]}")
node "$here/bin/troupe-bench.js" --url "$list" --only "$sc" --duration "${WARM:-3}" > /dev/null 2>&1
sleep 1
# per thread: CPU ticks, then voluntary and involuntary context switches
snap() { for p in "${pids[@]}"; do for t in /proc/$p/task/*; do echo "$p $(basename "$t") $(awk '{print $14+$15}' "$t/stat") $(awk '/ctxt_switches/ {printf "%s ", $2}' "$t/status")"; done; done; }
# the postmaster's own time plus its reaped children's (backends that exited), plus the live children's
pgticks() { { awk '{print $14+$15+$16+$17}' /proc/$pgpid/stat; for p in $(pgrep -P "$pgpid"); do awk '{print $14+$15}' /proc/$p/stat 2>/dev/null; done; } | awk '{s+=$1} END {print s+0}'; }
snap > "$work/before"; pg0=$(pgticks); o0=$(stat -c %s "$PGLOG")
out=$(node "$here/bin/troupe-bench.js" --url "$list" --only "$sc" --duration "$duration" --warmup 0 2>&1)
snap > "$work/after"; pg1=$(pgticks); o1=$(stat -c %s "$PGLOG")
tail -c +$((o0 + 1)) "$PGLOG" | head -c $((o1 - o0)) > "$work/pg.log"
runs=$(echo "$out" | awk -v s="$sc" '$1==s && $2=="completed" {print $3}')
echo "$out" | awk -v s="$sc" '$1==s && ($2=="throughput" || $2=="p50") {printf "%s %s %s  ", $1, $2, $3} END {print ""}'
for p in "${pids[@]}"; do kill -INT "$p"; done; wait 2>/dev/null
node "$here/bench/run-costs.mjs" "$label" "${runs:-0}" "$work/before" "$work/after" "$work/pg.log" "$pg0" "$pg1" "$work" "${pids[*]}" "${TOP:-25}"
node "$here/bench/pg-admin.mjs" drop "$PGU" $db
rm -rf "$work"
