#!/bin/bash
# Sequential alternated runs of several checkouts on LMDB, a fresh server and data dir each (wall-clock
# figures: for comparing commits across sessions on one machine, e.g. an old commit against main).
# usage: bench/alternate.sh ROUNDS SCENARIOS CHECKOUT... (env SERVE_ARGS, BENCH_ARGS)
#   e.g. bench/alternate.sh 3 wait-c1,wait-c64 /tmp/ab-old .
rounds=$1; sc=$2; shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
for r in $(seq 1 $rounds); do for co in "$@"; do
  d=$(mktemp -d /tmp/alt-XXXX); (cd $co && exec node bin/troupe.js serve --host 127.0.0.1 --config examples/service.json --rate-limit off --port 0 --data-dir $d ${SERVE_ARGS:-} > $d.log 2>&1) & p=$!
  for _ in $(seq 1 300); do u=$(grep -o 'http://127.0.0.1:[0-9]*' $d.log | head -1); [ -n "$u" ] && break; sleep 0.1; done
  res=$(cd "$here" && node bin/troupe-bench.js --url $u --only $sc ${BENCH_ARGS:-} 2>&1 | grep -E "^[a-z0-9-]+ +(p50|throughput|total) " | awk '{printf "%s/%s=%s ", $1,$2,$3}')
  echo "r$r $(basename $co) load=$(cut -d' ' -f1 /proc/loadavg) $res"
  kill $p; wait $p 2>/dev/null; rm -rf $d $d.log
done; done
