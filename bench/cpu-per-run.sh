#!/bin/bash
# CPU milliseconds per request of one bench scenario, by who spent them: the server's HTTP thread,
# its actor shards (as many of its busiest threads as it has actor workers, lg_api_workers_max on
# /metrics), its other threads (V8's platform threads: GC and compiles; libuv's pool),
# PostgreSQL's processes (all of the troupe-pg user's) and the bench client itself. From /proc
# (Linux), over one run of the scenario against a fresh server after a 3 s warm-up. CPU per run is
# steadier than runs/s on a shared machine; alternate two configurations to compare them.
#
# usage: bench/cpu-per-run.sh CHECKOUT lmdb|pg [SCENARIO=wait-c64] [SECONDS=10]
#   pg: a fresh database on ADMIN (default postgres://troupe@127.0.0.1:55432/postgres, as
#   bench/local-postgres.ts --port 55432 starts one). SERVE_ARGS: more `troupe serve` options
#   (e.g. --workers 1); SERVER_PREFIX / BENCH_PREFIX: a command in front of each (e.g. taskset -c 0);
#   PRE_SQL: a statement run on the new database once the server has migrated it. WARMUP: seconds
#   of the scenario run before measuring (default 3; ~30 for the steady state, JIT compiles done).
set -euo pipefail
co=$(cd "$1" && pwd); be=$2; sc=${3:-wait-c64}; dur=${4:-10}
here=$(cd "$(dirname "$0")/.." && pwd)
d=$(mktemp -d /tmp/troupe-cpu-XXXX); db=(); uri=""; admin=${ADMIN:-postgres://troupe@127.0.0.1:55432/postgres}; dbname=cpu_$$_$RANDOM
if [ "$be" = pg ]; then
  uri=$(node $here/bench/pg-admin.mjs create "$admin" $dbname)
  db=(--database-uri "$uri")
fi
# shellcheck disable=SC2086
(cd $co && exec ${SERVER_PREFIX:-} node bin/troupe.js serve --host 127.0.0.1 --config examples/service.json --rate-limit off --port 0 --data-dir $d "${db[@]}" ${SERVE_ARGS:-} > $d.log 2>&1) &
p=$!
# the database goes too: left, its autovacuum would run during the next measurement and count in its PostgreSQL CPU
trap 'kill $p 2>/dev/null; wait $p 2>/dev/null; rm -rf $d $d.log; [ -z "$uri" ] || node $here/bench/pg-admin.mjs drop "$admin" $dbname' EXIT
u=""
for _ in $(seq 1 300); do u=$(grep -o 'http://127.0.0.1:[0-9]*' $d.log | head -1 || true); [ -n "$u" ] && break; sleep 0.1; done
[ -n "$u" ] || { echo "server did not start: $d.log" >&2; cat $d.log >&2; exit 1; }
if [ -n "${PRE_SQL:-}" ]; then
  [ -n "$uri" ] || { echo "PRE_SQL needs the pg backend" >&2; exit 2; }
  node -e 'const pg=require(process.argv[1]);(async()=>{const c=new pg.Client(process.argv[2]);await c.connect();await c.query(process.argv[3]);await c.end()})()' "$here/node_modules/pg" "$uri" "$PRE_SQL"
fi
node $here/bin/troupe-bench.js --url $u --only $sc --duration ${WARMUP:-3} > /dev/null 2>&1
workers=$(curl -s $u/metrics | awk '/^lg_api_workers_max/ {print $2}')
ticks() { awk '{print $14+$15}' "$1"; } # utime + stime, clock ticks (10 ms)
threads() { for t in /proc/$p/task/*; do echo "$(basename $t) $(ticks $t/stat)"; done | sort; }
pgticks() { for q in $(pgrep -u troupe-pg || true); do awk '{print $14+$15+$16+$17}' /proc/$q/stat 2>/dev/null || true; done | awk '{s+=$1} END {print s+0}'; }
a=$(threads); pa=$(pgticks)
# shellcheck disable=SC2086
out=$(/usr/bin/time -f "BENCHCPU %U %S" ${BENCH_PREFIX:-} node $here/bin/troupe-bench.js --url $u --only $sc --duration $dur 2>&1)
b=$(threads); pb=$(pgticks)
tp=$(echo "$out" | grep -E "^$sc +throughput" | awk '{print $3}')
n=$(echo "$tp $dur" | awk '{print $1*$2}')
benchms=$(echo "$out" | grep BENCHCPU | awk -v n=$n '{printf "%.2f", ($2+$3)*1000/n}')
join <(echo "$a") <(echo "$b") | awk -v p=$p '{print ($1==p ? "main" : "t"), ($3-$2)*10}' | sort -k2 -n -r |
  awk -v n=$n -v pg=$((pb - pa)) -v tp=$tp -v sc=$sc -v bench=$benchms -v w=${workers:-1} '
    { if ($1 == "main") m = $2; else { k++; if (k <= w) s += $2; else o += $2 } }
    END { printf "%s %s/s; CPU ms per request: http %.2f shards(%d) %.2f other %.2f (troupe %.2f) postgres %.2f bench %s\n", sc, tp, m/n, w, s/n, o/n, (m+s+o)/n, pg*10/n, bench }'
