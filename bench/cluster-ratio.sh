#!/bin/bash
# Issue 22's ratio: runs/wait c64 of 3 nodes (round-robin) against 1 node, both on PostgreSQL,
# alternated in rounds (fresh database each; one node at its default --workers, the 3 nodes at
# each --workers value in W, e.g. "2 1"), so a shared machine's drift hits both sides alike.
# Prints each round's throughputs and ratios, then the median ratio per workers value.
#
# usage: PGU=ADMIN_URI [CO=CHECKOUT] [W="2 1"] [ROUNDS=2] [DUR=15] bench/cluster-ratio.sh
#   PGU: a local PostgreSQL, e.g. `npx tsx bench/local-postgres.ts --port 55432`
set -u
here=$(cd "$(dirname "$0")/.." && pwd); co=${CO:-$here}; cd "$co"
PGU=${PGU:?admin uri}; W=${W:-"2 1"}; rounds=${ROUNDS:-2}; dur=${DUR:-15}
serve() { local d; d=$(mktemp -d /tmp/troupe-ratio-XXXX); (exec node bin/troupe.js serve --host 127.0.0.1 --config examples/service.json --rate-limit off --port 0 --data-dir "$d" "$@" > "$d.log" 2>&1) & echo "$! $d"; }
url() { for _ in $(seq 1 600); do u=$(grep -o 'http://127.0.0.1:[0-9]*' "$1.log" | head -1 || true); [ -n "$u" ] && { echo "$u"; return; }; sleep 0.1; done; }
c64() { node "$here/bin/troupe-bench.js" --url "$1" --only wait-c64 --duration "$dur" 2>&1 | awk '$1=="wait-c64" && $2=="throughput" {print $3}'; }
results=$(mktemp)
for r in $(seq 1 "$rounds"); do
  uri=$(node "$here/bench/pg-admin.mjs" create "$PGU" ratio_one_$$)
  read -r p d < <(serve --database-uri "$uri"); one=$(c64 "$(url "$d")"); kill "$p"; wait "$p" 2>/dev/null
  echo "round $r: 1 node $one runs/s"
  for w in $W; do
    uri=$(node "$here/bench/pg-admin.mjs" create "$PGU" ratio_three_$$)
    pids=(); urls=()
    for i in 1 2 3; do read -r p d < <(serve --database-uri "$uri" --node-id "n$i" --workers "$w"); pids+=("$p"); urls+=("$(url "$d")"); done
    sleep 3 # every node registered (nodes_alive 3) before the load
    three=$(c64 "$(IFS=,; echo "${urls[*]}")"); kill "${pids[@]}"; wait 2>/dev/null
    ratio=$(node -e 'console.log((100*process.argv[1]/process.argv[2]).toFixed(0))' "$three" "$one")
    echo "round $r: 3 nodes --workers $w $three runs/s = $ratio% of 1 node"; echo "$w $ratio" >> "$results"
  done
done
for w in $W; do
  echo "median ratio, 3 nodes --workers $w: $(awk -v w="$w" '$1==w {print $2}' "$results" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')%"
done
rm -f "$results"
