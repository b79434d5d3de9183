#!/usr/bin/env bash
# The gavel-slurm demo (`make demo`, after `make build`).
#
# Where a local Slurm can be started (root or passwordless sudo; the Slurm
# scripts install debootstrap and fetch Debian trixie's Slurm 24.11, or with
# SLURM_RELEASE=26.05 Debian sid's Slurm 26.05, on first use, under a
# minute), it starts that Slurm, runs the daemon with 10 s
# rounds beside it, submits a small mixed workload and shows
# `gavel-slurm status` after a few rounds; then it stops the daemon and
# cancels the demo's jobs. Slurm is LEFT RUNNING for further trials; stop it
# with `make slurm-down`.
#
# Where Slurm cannot be started, it runs the simulator on a small generated
# workload and prints a policy's allocation for the built-in sample instead.
#
# One collector per node runs beside the daemon, on fake GPUs of the
# node's type, reading the files the node's Prolog writes; two of the
# demo's jobs report their progress, so status shows measured rates
# replacing the table's (and the default of a model no table knows).
#
# Settings (environment): DEMO_ROUND (10s), DEMO_ROUNDS (4),
# DEMO_LISTEN (127.0.0.1:18390), DEMO_COLLECTOR_LISTEN (127.0.0.1:18391),
# DEMO_POLICY (max_min_fairness_perf).
set -Eeuo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BIN=bin/gavel-slurm
ROUND=${DEMO_ROUND:-10s}
ROUNDS=${DEMO_ROUNDS:-4}
LISTEN=${DEMO_LISTEN:-127.0.0.1:18390}
COLLECTOR_LISTEN=${DEMO_COLLECTOR_LISTEN:-127.0.0.1:18391}
POLICY=${DEMO_POLICY:-max_min_fairness_perf}
DEMO_DIR=$PWD/.local/demo

say() { printf '\n== %s\n' "$*"; }

# listening HOST:PORT reports whether something accepts connections there.
listening() { (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; }

# free_addr HOST:PORT prints the address, or the first of the next 50
# ports on the host that nothing listens on: a daemon already on the
# demo's port (an earlier demo, another service) must not answer in place
# of this demo's own.
free_addr() {
  local host=${1%:*} port=${1##*:} p
  for ((p = port; p < port + 50; p++)); do
    listening "$host:$p" || { printf '%s:%s' "$host" "$p"; return 0; }
  done
  return 1
}

# daemon_failed prints why the demo's daemon is gone, with its log, and
# fails the demo.
daemon_failed() {
  echo "demo: FAILED: the daemon exited ($1); its log ($DEMO_DIR/daemon.log):" >&2
  cat "$DEMO_DIR/daemon.log" >&2
  exit 1
}

[ -x "$BIN" ] || { echo "demo: $BIN is missing; run 'make build' (or 'make demo')" >&2; exit 1; }

can_start_slurm() {
  [ "$(id -u)" -eq 0 ] || sudo -n true 2>/dev/null
}

simulator_demo() {
  say "Fallback: the trace-driven simulator (same policies and round mechanism as the daemon)"
  echo "   24 jobs, all arriving at once, on 4 v100 + 4 p100 + 4 k80 GPUs, 6-minute rounds:"
  for policy in max_min_fairness max_min_fairness_perf; do
    echo
    echo "-- policy $policy"
    (set -x; "$BIN" simulate --policy "$policy" --generate static --jobs 24 \
      --cluster v100=4,p100=4,k80=4 --seed 1)
  done
  say "A policy's allocation (fraction of time per job and GPU type) for the built-in sample problem"
  (set -x; "$BIN" allocate --sample --policy max_min_fairness_perf)
}

if ! can_start_slurm; then
  echo "demo: starting the local Slurm needs root or passwordless sudo (chroot, mounts)."
  simulator_demo
  exit 0
fi

say "Starting the local Slurm ${SLURM_RELEASE:-24.11} (scripts/slurm-up.sh; idempotent, a minute the first time)"
if ! bash scripts/slurm-up.sh; then
  echo "demo: the local Slurm could not be started (see the messages above)."
  simulator_demo
  exit 0
fi
set -a
# shellcheck source=/dev/null
. .local/slurm/env
set +a
PARTITION=${SLURM_PARTITION:-gpu}
"$SINFO" -o '%P %D %N %G %f'

mkdir -p "$DEMO_DIR"
# Ports something else listens on are skipped (said, not silent).
addr=$(free_addr "$LISTEN") || { echo "demo: FAILED: no free port near $LISTEN (set DEMO_LISTEN)" >&2; exit 1; }
[ "$addr" = "$LISTEN" ] || echo "demo: $LISTEN is taken; the daemon's API listens on $addr instead"
LISTEN=$addr
start=$COLLECTOR_LISTEN
[ "$start" != "$LISTEN" ] || start=${LISTEN%:*}:$((${LISTEN##*:} + 1))
addr=$(free_addr "$start") || { echo "demo: FAILED: no free port near $start (set DEMO_COLLECTOR_LISTEN)" >&2; exit 1; }
[ "$addr" = "$LISTEN" ] && addr=$(free_addr "${LISTEN%:*}:$((${LISTEN##*:} + 1))")
[ "$addr" = "$COLLECTOR_LISTEN" ] || echo "demo: $COLLECTOR_LISTEN is taken (or is the API's port now); collectors report to $addr instead"
COLLECTOR_LISTEN=$addr
rm -rf "$DEMO_DIR/state"
# The collectors' shared secret, readable by its owner only.
(umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$DEMO_DIR/collector.token")
CONFIG=$DEMO_DIR/gavel-slurm.toml
cat >"$CONFIG" <<EOF
# Written by scripts/demo.sh; every key is documented in etc/gavel-slurm.toml.
[slurm]
rest_url = "$SLURMRESTD_URL"
token_file = "$SLURM_JWT_FILE"
user = "$SLURM_USER_NAME"
partitions = ["$PARTITION"]
scontrol = "$SCONTROL"
[scheduler]
policy = "$POLICY"
round = "$ROUND"
default_grace = "3s"
# Jobs whose tag names no preempt= mode checkpoint (the shipped default is
# never); no job is moved before it ran two rounds.
default_preempt = "checkpoint"
min_run_time = "$ROUND"
[daemon]
state_dir = "$DEMO_DIR/state"
listen = "$LISTEN"
# Node collectors post their measurements here; a run's first seconds
# (start-up) are left out.
collector_listen = "$COLLECTOR_LISTEN"
collector_token_file = "$DEMO_DIR/collector.token"
collector_warm_up = "4s"
EOF

JOBS=()
DAEMON_PID=
COLLECTOR_PIDS=()
cleanup() {
  if [ "${#COLLECTOR_PIDS[@]}" -gt 0 ]; then
    kill -TERM "${COLLECTOR_PIDS[@]}" 2>/dev/null || true
    wait "${COLLECTOR_PIDS[@]}" 2>/dev/null || true
  fi
  if [ -n "$DAEMON_PID" ] && kill -0 "$DAEMON_PID" 2>/dev/null; then
    say "Stopping the daemon (SIGTERM)"
    kill -TERM "$DAEMON_PID" && wait "$DAEMON_PID" || true
  fi
  if [ "${#JOBS[@]}" -gt 0 ]; then
    say "Cancelling the demo's jobs: ${JOBS[*]}"
    "$SCANCEL" "${JOBS[@]}" 2>/dev/null || true
  fi
  echo
  echo "The local Slurm is still running (stop it with 'make slurm-down')."
  echo "Daemon log: $DEMO_DIR/daemon.log"
}
trap cleanup EXIT

# A training job stand-in: counts steps, saves its count on SIGUSR1 (the
# daemon's warning before a preemption), exits, and resumes from its count
# after the daemon requeues it (docs/preemption.md).
SCRIPT=$SLURM_SHARED_DIR/gavel-demo-job.sh
cat >"$SCRIPT" <<EOF
#!/bin/bash
ckpt=$SLURM_SHARED_DIR_IN_JOB/gavel-demo-\$SLURM_JOB_ID.ckpt
step=0
[ -f "\$ckpt" ] && step=\$(cat "\$ckpt")
echo "job \$SLURM_JOB_ID starts at step \$step on GPUs \$CUDA_VISIBLE_DEVICES"
stop=0
trap 'stop=1' USR1
while [ \$stop -eq 0 ] && [ \$step -lt 3000 ]; do sleep 0.1; step=\$((step+1)); done
echo \$step >"\$ckpt"
[ \$step -ge 3000 ] && exit 0
echo "job \$SLURM_JOB_ID saved step \$step and exits; the daemon requeues it"
exit 0
EOF
chmod 755 "$SCRIPT"

# A job that reports its progress: it appends "STEPS UNIX_TIME" to the
# file the TaskProlog names in $GAVEL_PROGRESS_FILE, at a rate that
# depends on the GPU type of its node (arguments: steps/s on v100, p100,
# k80), and checkpoints its step count like the job above.
PROGRESS_SCRIPT=$SLURM_SHARED_DIR/gavel-demo-progress.sh
cat >"$PROGRESS_SCRIPT" <<EOF
#!/bin/bash
case \$SLURMD_NODENAME in v100*) rate=\$1 ;; p100*) rate=\$2 ;; *) rate=\$3 ;; esac
ckpt=$SLURM_SHARED_DIR_IN_JOB/gavel-demo-\$SLURM_JOB_ID.ckpt
base=0
[ -f "\$ckpt" ] && base=\$(cat "\$ckpt")
start=\$(date +%s.%N)
echo "job \$SLURM_JOB_ID starts at step \$base on \$SLURMD_NODENAME at \$rate steps/s, progress in \${GAVEL_PROGRESS_FILE:-nowhere}"
stop=0
trap 'stop=1' USR1
while [ \$stop -eq 0 ]; do
  sleep 1
  now=\$(date +%s.%N)
  step=\$(awk -v b="\$base" -v s="\$start" -v n="\$now" -v r="\$rate" 'BEGIN { printf "%d", b + (n - s) * r }')
  [ -n "\${GAVEL_PROGRESS_FILE:-}" ] && echo "\$step \$now" >>"\$GAVEL_PROGRESS_FILE"
done
echo \$step >"\$ckpt"
echo "job \$SLURM_JOB_ID saved step \$step and exits; the daemon requeues it"
exit 0
EOF
chmod 755 "$PROGRESS_SCRIPT"

submit() {
  submit_script gavel-demo-job.sh "" "$@"
}

# submit_script SCRIPT "SCRIPT ARGUMENTS" SBATCH_OPTIONS...
submit_script() {
  local id script=$1 script_args
  read -r -a script_args <<<"$2"
  shift 2
  id=$("$SBATCH" --parsable --partition="$PARTITION" --time=30 \
    --output="$SLURM_SHARED_DIR_IN_JOB/gavel-demo-%j.out" "$@" "$SLURM_SHARED_DIR_IN_JOB/$script" "${script_args[@]}")
  id=${id%%;*}
  JOBS+=("$id")
  echo "   job $id: sbatch $*"
}

# One collector per node of the partition, on fake GPUs of the node's
# type, reading the folders the node's Prolog writes (the local Slurm
# gives each node its own, under $SLURM_COLLECTOR_DIR).
start_collectors() {
  local group type count gpus i node
  for group in $SLURM_GPU_NODES; do
    IFS=: read -r type count gpus <<<"$group"
    for ((i = 1; i <= count; i++)); do
      node=$type-$i
      "$BIN" collector --fake-gpus "$type:$gpus" --node "$node" --interval 3s \
        --jobs-dir "$SLURM_COLLECTOR_DIR/$node/jobs" --progress-dir "$SLURM_COLLECTOR_DIR/$node/progress" \
        --proc-root "$DEMO_DIR/no-proc" --daemon-url "http://$COLLECTOR_LISTEN" \
        --token-file "$DEMO_DIR/collector.token" >"$DEMO_DIR/collector-$node.log" 2>&1 &
      COLLECTOR_PIDS+=($!)
    done
  done
  echo "   ${#COLLECTOR_PIDS[@]} collectors (logs in $DEMO_DIR/collector-*.log)"
}

say "Submitting a mixed workload: 8 tagged 4-GPU jobs (more than the 24 GPUs hold), one untagged job, one malformed tag"
echo "   (Slurm may start some at once; the daemon takes over from its first round)"
echo "   preemption modes: the site default (checkpoint), one job preempt=never, one preempt=requeue"
echo "   two 1-GPU jobs report their progress: a model no table knows (300/150/50 steps/s on v100/p100/k80)"
echo "   and resnet18-bs64, a bit slower here than the reference table says (20/18/6 against 24.1/22.3/7.1)"
submit_script gavel-demo-progress.sh "300 150 50" --gres=gpu:1 --comment="gavel: model=my-new-net steps=1000000"
submit_script gavel-demo-progress.sh "20 18 6" --gres=gpu:1 --comment="gavel: model=resnet18-bs64 steps=1000000"
for model in resnet50-bs64 transformer-bs64 a3c lm-bs20 resnet18-bs128 cyclegan; do
  submit --gres=gpu:4 --comment="gavel: model=$model steps=3000"
done
submit --gres=gpu:4 --comment="gavel: model=recommendation-bs512 steps=3000 preempt=never"
submit --gres=gpu:4 --comment="gavel: model=resnet50-bs64 steps=3000 preempt=requeue"
submit --gres=gpu:1 --comment="an ordinary job, left to Slurm"
submit --gres=gpu:1 --comment="gavel: model=a3c steps=lots"

say "Starting the daemon: policy $POLICY, ${ROUND} rounds, API on $LISTEN (log in $DEMO_DIR/daemon.log)"
echo "   $BIN daemon --config $CONFIG"
"$BIN" daemon --config "$CONFIG" >"$DEMO_DIR/daemon.log" 2>&1 &
DAEMON_PID=$!
up=0
for _ in $(seq 50); do
  kill -0 "$DAEMON_PID" 2>/dev/null || daemon_failed "before it answered"
  if "$BIN" status --server "$LISTEN" >/dev/null 2>&1; then
    up=1
    break
  fi
  sleep 0.2
done
# The answer must be this daemon's: it is still running, and its log
# says it listens where the demo asks.
[ "$up" = 1 ] || daemon_failed "no answer on $LISTEN after 10 s"
for _ in $(seq 50); do
  kill -0 "$DAEMON_PID" 2>/dev/null || daemon_failed "right after it started"
  grep -q "\"listen\":\"$LISTEN\"" "$DEMO_DIR/daemon.log" && break
  sleep 0.1
done
grep -q "\"listen\":\"$LISTEN\"" "$DEMO_DIR/daemon.log" || daemon_failed "it does not say it listens on $LISTEN" 

say "Starting the node collectors: reports every 3s to $COLLECTOR_LISTEN"
mkdir -p "$DEMO_DIR/no-proc"
start_collectors

for round in $(seq "$ROUNDS"); do
  say "Waiting one round (${ROUND}), then: $BIN status --server $LISTEN   [round $round of $ROUNDS]"
  sleep "$ROUND"
  kill -0 "$DAEMON_PID" 2>/dev/null || daemon_failed "during round $round"
  "$BIN" status --server "$LISTEN" || true
done

say "Slurm's own view of the demo's jobs (squeue)"
"$SQUEUE" -j "$(IFS=,; echo "${JOBS[*]}")" -o '%.6i %.10T %.8r %.10f %.12b %N %k' || true
