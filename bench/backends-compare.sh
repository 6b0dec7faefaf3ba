#!/bin/bash
# LMDB vs Postgres (1 node) vs Postgres (3 nodes round-robin) on one checkout, as bench/RESULTS.md records them.
# usage: PGU=ADMIN_URI [CO=CHECKOUT] bench/backends-compare.sh OUTDIR   (PGU: a local PostgreSQL, e.g. bench/local-postgres.ts)
set -u
here=$(cd "$(dirname "$0")/.." && pwd); out=$(realpath -m "$1"); mkdir -p $out; co=${CO:-$here}; cd $co
PGU=${PGU:?admin uri}
serve() { # name, extra args...
  local n=$1; shift; local d=$(mktemp -d /tmp/troupe-compare-$n-XXXX)
  (exec node bin/troupe.js serve --host 127.0.0.1 --config examples/service.json --rate-limit off --port 0 --data-dir $d "$@" > $d.log 2>&1) &
  echo "$! $d"
}
url() { for _ in $(seq 1 600); do u=$(grep -o 'http://127.0.0.1:[0-9]*' "$1.log" | head -1 || true); [ -n "$u" ] && { echo "$u"; return; }; sleep 0.1; done; }
B() { node $here/bin/troupe-bench.js "$@" 2>&1; }
uptime > $out/uptime-start.txt
# 1. LMDB
read -r p d < <(serve lmdb); u=$(url $d)
B --url $u --only wait-c1,wait-c64,stream-ttfe,enqueue-1000,stream-join --stream-runs 100 > $out/lmdb.txt
kill $p; wait $p 2>/dev/null
# 2. Postgres, one node
U1=$(node $here/bench/pg-admin.mjs create $PGU cmp_one_$$)
read -r p d < <(serve pg1 --database-uri $U1); u=$(url $d)
B --url $u --only wait-c1,wait-c64,stream-ttfe,enqueue-1000,stream-join --stream-runs 100 > $out/pg1.txt
kill $p; wait $p 2>/dev/null
# dropped at once: a database left behind is vacuumed while the next measurement runs
node $here/bench/pg-admin.mjs drop $PGU cmp_one_$$
# 3. Postgres, three nodes (round-robin)
U3=$(node $here/bench/pg-admin.mjs create $PGU cmp_three_$$)
read -r p1 d1 < <(serve n1 --database-uri $U3 --node-id n1); read -r p2 d2 < <(serve n2 --database-uri $U3 --node-id n2); read -r p3 d3 < <(serve n3 --database-uri $U3 --node-id n3)
u1=$(url $d1); u2=$(url $d2); u3=$(url $d3)
for _ in $(seq 1 100); do n=$(curl -s $u1/info | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{try{console.log(JSON.parse(s).nodes_alive)}catch{console.log(0)}})'); [ "$n" = "3" ] && break; sleep 0.5; done
B --url $u1,$u2,$u3 --only wait-c1,wait-c64,stream-ttfe,stream-join --stream-runs 100 > $out/pg3.txt
kill $p1 $p2 $p3; wait 2>/dev/null
node $here/bench/pg-admin.mjs drop $PGU cmp_three_$$
uptime > $out/uptime-end.txt
grep -hE "^(wait-c1|wait-c64|stream-ttfe|stream-join|enqueue-1000) +(p50|throughput|ttfe_p50|ttfe_p99|total|errors)" $out/*.txt
