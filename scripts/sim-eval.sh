#!/usr/bin/env bash
# Reproduces the simulation results of docs/evaluation.md: the continuous
# single-GPU workload on a 36/36/36 cluster (measurement window 4000:5000,
# seeds 0-2) for three heterogeneity-aware policies and their agnostic
# baselines, then the static 100-job makespan comparison on 36/36/36
# (single-GPU) and 8/8/8 (multi-GPU).
#
#   scripts/sim-eval.sh [OUT_DIR] [RATES] [PARALLEL]
#
# RATES defaults to 0.8:6.4:0.8 jobs/hour, PARALLEL (simulations at once)
# to all cores. On a machine shared with other work, use PARALLEL 1 and
# run the script under nice -n 19. The finish-time fairness sweep is the
# slow one (about 25 minutes for its 5.6 and 6.4 jobs/h points on one core).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-sim-eval}
rates=${2:-0.8:6.4:0.8}
parallel=${3:-$(nproc)}
bin=bin/gavel-slurm
[ -x "$bin" ] || make build
mkdir -p "$out"
for pair in "max_min_fairness_perf,max_min_fairness las" \
            "fifo_perf,fifo fifo" \
            "finish_time_fairness_perf,finish_time_fairness ftf"; do
  set -- $pair
  "$bin" simulate --sweep-rates "$rates" --policies "$1" --seeds 0,1,2 \
    --window 4000:5000 --max-active 1500 --parallel "$parallel" --out "$out/$2"
done
for p in min_total_duration_perf min_total_duration fifo gandiva; do
  "$bin" simulate --generate static --jobs 100 --seed 0 --policy "$p" --json > "$out/static_$p.json"
  "$bin" simulate --generate static --jobs 100 --seed 0 --policy "$p" --multi-gpu \
    --cluster v100=8,p100=8,k80=8 --json > "$out/static_multi_$p.json"
done
echo "results in $out"
