#!/bin/bash
# Runs one bench scenario against a fresh Troupe server started from a checkout, after an optional
# warm-up, and prints the scenario's headline figures plus the CPU each server thread used during
# it (ms, from /proc; Linux only), largest first: the busy actor worker is the first figure.
# Alternate two checkouts (e.g. a `git worktree` of the old commit and this one) to compare code
# on a noisy machine by CPU rather than by wall time alone.
#
# usage: bench/ab-thread-cpu.sh CHECKOUT LABEL [SCENARIO=enqueue-1000] [WARMUP=wait-c1,wait-c64,stateless-wait,stream-ttfe]
#   e.g. for i in 1 2 3; do bench/ab-thread-cpu.sh /tmp/old A; bench/ab-thread-cpu.sh . B; done
set -euo pipefail
checkout=$(cd "$1" && pwd); label=$2; scenario=${3:-enqueue-1000}; warmup=${4-wait-c1,wait-c64,stateless-wait,stream-ttfe}
here=$(cd "$(dirname "$0")/.." && pwd)
data=$(mktemp -d "${TMPDIR:-/tmp}/troupe-ab-$label-XXXX"); log=$data.log
(cd "$checkout" && exec node bin/troupe.js serve --host 127.0.0.1 --config examples/service.json --rate-limit off --port 0 --data-dir "$data" > "$log" 2>&1) &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$data" "$log"' EXIT
url=""
for _ in $(seq 1 300); do url=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | head -1 || true); [ -n "$url" ] && break; sleep 0.1; done
[ -n "$url" ] || { echo "server did not start:"; cat "$log"; exit 1; }
bench() { (cd "$here" && node bin/troupe-bench.js --url "$url" --pid "$pid" --only "$1" --out "$data/$1.json"); }
[ -n "$warmup" ] && bench "$warmup" > /dev/null 2>&1
snapshot() { for t in /proc/$pid/task/*; do echo "$(basename "$t") $(awk '{print $14+$15}' "$t/stat")"; done | sort; }
before=$(snapshot)
figures=$(bench "$scenario" 2>&1 | awk -v s="$scenario" '$1 == s && ($2 ~ /^(total|create_phase|throughput|runs_per_s|p50)$/) {printf "%s=%s ", $2, $3}')
after=$(snapshot)
tick_ms=$((1000 / $(getconf CLK_TCK)))
cpu=$(join <(echo "$before") <(echo "$after") | awk -v t="$tick_ms" '{d = ($3 - $2) * t; if (d >= 50) print d}' | sort -rn | tr '\n' ' ')
echo "$label $scenario ${figures}thread_cpu_ms: $cpu"
