#!/bin/bash
# Loads two servers AT THE SAME TIME with one bench scenario each (so both see the same machine
# noise) and prints each server's CPU (from /proc) per request: all its threads (`cpu`), the HTTP
# thread (`main`) and its busiest other thread (`top`: on enqueue-1000 the thread's actor worker).
# On a shared, noisy machine this compares two commits where sequential wall-clock runs cannot;
# swap the order between rounds (the first-started server may differ) and run an A/A pair for
# the spread. Requests: throughput × duration for the closed-loop scenarios, the runs created for
# enqueue-1000 (its warm-up is a whole enqueue-1000 too, and its wall `total` s is printed).
# AB_BENCH_ARGS adds bench options to every run (e.g. "--enqueue-runs 500").
# AB_DATABASE_URI (an admin URI of a PostgreSQL on this machine, e.g. from bench/local-postgres.ts)
# runs both servers on Postgres, each on a fresh database, and adds `pg`: the CPU of the database
# server processes serving it, per request.
#
# usage: bench/ab-pair.sh CHECKOUT_A CHECKOUT_B [SCENARIO=ok] [DURATION_S=8]
#   e.g. for i in 1 2 3; do bench/ab-pair.sh /tmp/old .; bench/ab-pair.sh . /tmp/old; done
set -uo pipefail
sc=${3:-ok}; dur=${4:-8}
here=$(cd "$(dirname "$0")/.." && pwd)
pgdb=()
# start CHECKOUT [DB_NAME]: prints "pid dir"
start() {
  local d db=(); d=$(mktemp -d "${TMPDIR:-/tmp}/troupe-pair-XXXX")
  [ -n "${2:-}" ] && db=(--database-uri "$(node "$here/bench/pg-admin.mjs" create "$AB_DATABASE_URI" "$2")")
  (cd "$1" && exec node bin/troupe.js serve --host 127.0.0.1 --config examples/service.json --rate-limit off --port 0 --data-dir "$d" "${db[@]}" > "$d.log" 2>&1) &
  echo "$! $d"
}
# summed CPU ticks of the database server processes serving database $1 (0 without Postgres)
pgticks() {
  [ -n "${1:-}" ] || { echo 0; return; }
  for p in $(node "$here/bench/pg-admin.mjs" backends "$AB_DATABASE_URI" "$1"); do awk '{print $14+$15}' "/proc/$p/stat" 2>/dev/null; done | awk '{s += $1} END {print s + 0}'
}
url() { for _ in $(seq 1 300); do u=$(grep -o 'http://127.0.0.1:[0-9]*' "$1.log" | head -1 || true); [ -n "$u" ] && { echo "$u"; return; }; sleep 0.1; done; }
# "tid ticks" of every thread of a process
threads() { for t in /proc/"$1"/task/*; do echo "$(basename "$t") $(awk '{print $14+$15}' "$t/stat" 2>/dev/null || echo 0)"; done | sort; }
# shellcheck disable=SC2086 # AB_BENCH_ARGS: several words
bench() { (cd "$here" && node bin/troupe-bench.js --url "$1" --only "$sc" --duration "$2" --warmup "$3" ${AB_BENCH_ARGS:-} 2>&1); }
if [ -n "${AB_DATABASE_URI:-}" ]; then pgdb=("troupe_ab_$$_a" "troupe_ab_$$_b"); else pgdb=("" ""); fi
read -r pa da < <(start "$1" "${pgdb[0]}"); read -r pb db < <(start "$2" "${pgdb[1]}")
cleanup() {
  kill $pa $pb 2>/dev/null; wait 2>/dev/null; rm -rf "$da" "$db" "$da".* "$db".*
  for n in "${pgdb[@]}"; do [ -n "$n" ] && node "$here/bench/pg-admin.mjs" drop "$AB_DATABASE_URI" "$n"; done
}
trap cleanup EXIT
ua=$(url "$da"); ub=$(url "$db")
bench "$ua" 2 1 > /dev/null & bg=$!; bench "$ub" 2 1 > /dev/null; wait $bg; sleep 1
threads $pa > "$da.t0"; threads $pb > "$db.t0"; pgticks "${pgdb[0]}" > "$da.pg0"; pgticks "${pgdb[1]}" > "$db.pg0"
bench "$ua" "$dur" 0 > "$da.out" & bg=$!; bench "$ub" "$dur" 0 > "$db.out"; wait $bg
threads $pa > "$da.t1"; threads $pb > "$db.t1"; pgticks "${pgdb[0]}" > "$da.pg1"; pgticks "${pgdb[1]}" > "$db.pg1"
hz=$(getconf CLK_TCK)
# CPU µs per request of all threads, the main thread and the busiest other thread
per() {
  local n
  n=$(awk -v s="$sc" -v d="$dur" '$1 == s && $2 == "throughput" {print $3 * d} $1 == s && $2 == "created" {print $3}' "$1.out" | head -1)
  [ -n "$n" ] && [ "$n" != "0" ] || { echo "no-result"; return; }
  awk -v s="$sc" '$1 == s && $2 == "total" {printf "total=%ss ", $3}' "$1.out"
  join "$1.t0" "$1.t1" | awk -v pid="$2" -v n="$n" -v hz="$hz" '
    { d = $3 - $2; all += d; if ($1 == pid) main = d; else if (d > top) top = d }
    END { f = 1e6 / hz / n; printf "n=%d cpu=%.1f main=%.1f top=%.1f", n, all * f, main * f, top * f }'
  [ -n "${AB_DATABASE_URI:-}" ] && awk -v n="$n" -v hz="$hz" -v a="$(cat "$1.pg0")" '{ printf " pg=%.1f", ($1 - a) * 1e6 / hz / n }' "$1.pg1"
}
echo "A=$(basename "$(cd "$1" && pwd)") $(per "$da" $pa)  B=$(basename "$(cd "$2" && pwd)") $(per "$db" $pb)  (${sc}, µs/request)"
