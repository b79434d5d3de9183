#!/usr/bin/env bash
# Reproduces the simulation results of docs/evaluation.md: the continuous
# single-GPU workload on a 36/36/36 cluster (measurement window 4000:5000,
# seeds 0-2) for three heterogeneity-aware policies and their agnostic
# baselines, finish-time fairness on the continuous multi-GPU workload,
# max_min_fairness_perf with throughputs learned by
# measurement, then the static 100-job makespan comparison on 36/36/36
# (single-GPU) and 8/8/8 (multi-GPU).
#
#   scripts/sim-eval.sh [OUT_DIR] [RATES] [PARALLEL]
#
# RATES defaults to 0.8:6.4:0.8 jobs/hour, PARALLEL (simulations at once)
# to all cores. On a machine shared with other work, use PARALLEL 1 and
# run the script under nice -n 19. The finish-time fairness sweeps are the
# slow ones: their LPs grow with the number of jobs in the system.
#
# Every sweep also runs the isolated policy once per rate and seed
# (OUT_DIR/*/isolated.csv): the ftf_isolated column of sweep.csv is each
# run's mean JCT / JCT under the isolated policy, the finish-time fairness
# Gavel's figures report.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-sim-eval}
rates=${2:-0.8:6.4:0.8}
parallel=${3:-$(nproc)}
bin=bin/gavel-slurm
[ -x "$bin" ] || make build
# The figures reproduce the paper's round mechanism, which is not the
# simulator's default; every run below names it.
sim() { "$bin" simulate --mechanism gavel "$@"; }
mkdir -p "$out"
for pair in "max_min_fairness_perf,max_min_fairness las" \
            "fifo_perf,fifo fifo" \
            "finish_time_fairness_perf,finish_time_fairness ftf"; do
  set -- $pair
  sim --sweep-rates "$rates" --policies "$1" --seeds 0,1,2 \
    --window 4000:5000 --max-active 1500 --parallel "$parallel" --out "$out/$2"
done
# Finish-time fairness on the multi-GPU trace (the paper's Figure 10).
sim --multi-gpu --sweep-rates "$rates" --policies finish_time_fairness_perf,finish_time_fairness \
  --seeds 0,1,2 --window 4000:5000 --max-active 1500 --parallel "$parallel" --out "$out/ftf-multi-gpu"
# The cost of learning throughputs: max_min_fairness_perf with the true
# throughputs hidden from the policy (rates up to 5.6 jobs/h only).
common="--policies max_min_fairness_perf --seeds 0,1,2 --window 4000:5000 --max-active 1500 --parallel $parallel --estimate"
sim --sweep-rates 0.8:5.6:0.8 $common --out "$out/learned"
sim --sweep-rates 2.4:5.6:1.6 $common --estimate-noise 0.05 --out "$out/learned-noise"
sim --sweep-rates 2.4:5.6:1.6 $common --estimate-reference none --out "$out/learned-none"
for p in min_total_duration_perf min_total_duration fifo gandiva; do
  sim --generate static --jobs 100 --seed 0 --policy "$p" --json > "$out/static_$p.json"
  sim --generate static --jobs 100 --seed 0 --policy "$p" --multi-gpu \
    --cluster v100=8,p100=8,k80=8 --json > "$out/static_multi_$p.json"
done
echo "results in $out"
