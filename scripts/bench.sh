#!/usr/bin/env bash
# Benchmarks: `go test -bench` over every package (time and memory per
# operation), then whole `gavel-slurm allocate` processes on generated
# problems, timed end to end with their peak memory (GNU time).
#
# `scripts/bench.sh processes` runs only the whole-process part. BIN names
# another gavel-slurm binary to time (an older build, for a comparison on
# the same machine at the same time).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BIN:-bin/gavel-slurm}

status=0
if [ "${1:-}" != processes ]; then
  echo "== go test -bench (all packages)"
  go test -run '^$' -bench . -benchmem ./... || status=1
  echo
fi

echo "== whole allocate processes (JSON in, allocation out), $bin"
echo "   wall: best of 3; cpu: user+system of that run; identical: jobs drawn"
echo "   from the reference table's job types; distinct: every job different"
echo "   (genproblem --distinct: per-job rates, scale factors 1-8, weights 1-2)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/genproblem" ./scripts/genproblem
run() { # label policy genproblem-args...
  local label=$1 pol=$2; shift 2
  "$tmp/genproblem" "$@" >"$tmp/in.json"
  local best="" cpu="" mem=""
  for _ in 1 2 3; do
    /usr/bin/time -f '%e %U %S %M' -o "$tmp/t" "$bin" allocate --policy "$pol" --input "$tmp/in.json" --json >"$tmp/out.json"
    read -r secs user sys kib <"$tmp/t"
    if [ -z "$best" ] || awk "BEGIN{exit !($secs < $best)}"; then
      best=$secs mem=$kib cpu=$(awk "BEGIN{print $user + $sys}")
    fi
  done
  local objective
  objective=$(sed -n 's/^  "objective": \(.*\),$/\1/p' "$tmp/out.json")
  printf '%-58s %7.3f s  cpu %6.3f s  peak %5.0f MiB  objective %s\n' "$label" "$best" "$cpu" "$(awk "BEGIN{print $mem/1024}")" "$objective"
}
run "max_min_fairness_perf, 2048 jobs, identical" max_min_fairness_perf --jobs 2048
run "max_min_fairness_perf, 2048 jobs, distinct" max_min_fairness_perf --jobs 2048 --distinct
run "max_min_fairness_perf, 8192 jobs, identical" max_min_fairness_perf --jobs 8192
run "max_min_fairness_perf, 8192 jobs, distinct" max_min_fairness_perf --jobs 8192 --distinct
run "water filling (hierarchical), 2048 jobs, identical" max_min_fairness_water_filling_perf --jobs 2048 --entities 8
run "water filling (hierarchical), 2048 jobs, distinct" max_min_fairness_water_filling_perf --jobs 2048 --entities 8 --distinct
run "max_min_fairness_packed, 512 jobs, identical" max_min_fairness_packed --jobs 512 --pairs
run "finish_time_fairness_perf, 2048 jobs, identical" finish_time_fairness_perf --jobs 2048 --history
run "finish_time_fairness_perf, 2048 jobs, distinct" finish_time_fairness_perf --jobs 2048 --history --distinct
run "isolated (no LP: decoding and output), 8192 jobs, distinct" isolated --jobs 8192 --distinct
exit $status
