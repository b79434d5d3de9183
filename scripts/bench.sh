#!/usr/bin/env bash
# Benchmarks: `go test -bench` over every package (time and memory per
# operation), then whole `gavel-slurm allocate` processes on generated
# problems, timed end to end with their peak memory (GNU time).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== go test -bench (all packages)"
status=0
go test -run '^$' -bench . -benchmem ./... || status=1

echo
echo "== whole allocate processes (JSON in, allocation out)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/genproblem" ./scripts/genproblem
run() { # label policy genproblem-args...
  local label=$1 pol=$2; shift 2
  "$tmp/genproblem" "$@" >"$tmp/in.json"
  local best=""
  for _ in 1 2 3; do
    /usr/bin/time -f '%e %M' -o "$tmp/t" bin/gavel-slurm allocate --policy "$pol" --input "$tmp/in.json" --json >"$tmp/out.json"
    read -r secs kib <"$tmp/t"
    if [ -z "$best" ] || awk "BEGIN{exit !($secs < $best)}"; then best=$secs; mem=$kib; fi
  done
  printf '%-48s %8.3f s  peak %6.0f MiB  (best of 3)\n' "$label" "$best" "$(awk "BEGIN{print $mem/1024}")"
}
run "max_min_fairness_perf, 2048 jobs" max_min_fairness_perf --jobs 2048
run "max_min_fairness_perf, 8192 jobs" max_min_fairness_perf --jobs 8192
run "water filling (hierarchical), 2048 jobs" max_min_fairness_water_filling_perf --jobs 2048 --entities 8
run "max_min_fairness_packed, 512 jobs" max_min_fairness_packed --jobs 512 --pairs
run "finish_time_fairness_perf, 2048 jobs" finish_time_fairness_perf --jobs 2048 --history
exit $status
