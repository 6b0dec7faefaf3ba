#!/bin/bash
# Loads two servers AT THE SAME TIME with one bench scenario each (so both see the same machine
# noise) and prints each server's CPU (all its threads, from /proc) per request. On a shared,
# noisy machine this compares two commits where sequential wall-clock runs cannot; swap the
# order between rounds (the first-started server may differ) and run an A/A pair for the spread.
#
# usage: bench/ab-pair.sh CHECKOUT_A CHECKOUT_B [SCENARIO=ok] [DURATION_S=8]
#   e.g. for i in 1 2 3; do bench/ab-pair.sh /tmp/old .; bench/ab-pair.sh . /tmp/old; done
set -uo pipefail
sc=${3:-ok}; dur=${4:-8}
here=$(cd "$(dirname "$0")/.." && pwd)
start() {
  local d; d=$(mktemp -d "${TMPDIR:-/tmp}/troupe-pair-XXXX")
  (cd "$1" && exec node bin/troupe.js serve --host 127.0.0.1 --config examples/service.json --rate-limit off --port 0 --data-dir "$d" > "$d.log" 2>&1) &
  echo "$! $d"
}
url() { for _ in $(seq 1 300); do u=$(grep -o 'http://127.0.0.1:[0-9]*' "$1.log" | head -1 || true); [ -n "$u" ] && { echo "$u"; return; }; sleep 0.1; done; }
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
bench() { (cd "$here" && node bin/troupe-bench.js --url "$1" --only "$sc" --duration "$2" --warmup "$3" 2>&1); }
read -r pa da < <(start "$1"); read -r pb db < <(start "$2")
trap 'kill $pa $pb 2>/dev/null; wait 2>/dev/null; rm -rf "$da" "$db" "$da".* "$db".*' EXIT
ua=$(url "$da"); ub=$(url "$db")
bench "$ua" 2 1 > /dev/null & bg=$!; bench "$ub" 2 1 > /dev/null; wait $bg; sleep 1
ta=$(cpu $pa); tb=$(cpu $pb)
bench "$ua" "$dur" 0 > "$da.out" & bg=$!; bench "$ub" "$dur" 0 > "$db.out"; wait $bg
ta=$(( $(cpu $pa) - ta )); tb=$(( $(cpu $pb) - tb ))
hz=$(getconf CLK_TCK)
per() { awk -v s="$sc" -v t="$2" -v d="$dur" -v hz="$hz" '$1 == s && $2 == "throughput" {printf "throughput=%s cpu_us_per_req=%.1f", $3, t * 1e6 / hz / ($3 * d)}' "$1"; }
echo "A=$(basename "$(cd "$1" && pwd)") $(per "$da.out" $ta)  B=$(basename "$(cd "$2" && pwd)") $(per "$db.out" $tb)"
