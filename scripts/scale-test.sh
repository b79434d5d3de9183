#!/usr/bin/env bash
# Scale scenario: the local Slurm with many emulated GPU nodes, thousands of
# tagged jobs, and the daemon with short rounds. It prints, per round, the
# daemon's own round figures (from its round log), slurmctld's RPC counts
# (sdiag before and after), and at the end the daemon's peak RSS, the
# latency of users' squeue and sbatch timed from a second process while the
# rounds ran, and the time of `gavel-slurm status --json`.
#
# Not part of `make test`: it takes minutes and loads the machine.
#
# Settings (environment):
#   SCALE_JOBS    tagged single-GPU jobs to submit (default 1000)
#   SCALE_NODES   SLURM_GPU_NODES for the local Slurm
#                 (default "v100:10:8 p100:10:8 k80:10:8", 240 GPUs)
#   SCALE_ROUND   the daemon's round (default 60s); min_run_time is the same
#   SCALE_ROUNDS  rounds to watch (default 4)
#   SCALE_POLICY  default max_min_fairness_perf
#   SCALE_MECHANISM  the round mechanism (default improved: it moves every
#                 running job once min_run_time has passed, the mass move
#                 the scenario measures; the daemon's default, restart,
#                 holds these jobs for 40 minutes and moves almost none)
#   SCALE_DIR     where logs and results go (default .local/scale)
#   SCALE_FRESH   1 (default): cancel the partition's jobs first; 0: keep
#                 the tagged jobs already there and submit only the rest
#   SLURM_RELEASE, SLURMCTLD_PORT, SLURMD_PORT_BASE, SLURMRESTD_PORT as for
#   scripts/slurm-up.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${SCALE_JOBS:-1000}
NODES=${SCALE_NODES:-"v100:10:8 p100:10:8 k80:10:8"}
ROUND=${SCALE_ROUND:-60s}
ROUNDS=${SCALE_ROUNDS:-4}
POLICY=${SCALE_POLICY:-max_min_fairness_perf}
MECHANISM=${SCALE_MECHANISM:-improved}
DIR=${SCALE_DIR:-$PWD/.local/scale}
LISTEN=${SCALE_LISTEN:-127.0.0.1:17880}
BIN=$PWD/bin/gavel-slurm
say() { echo "scale: $*"; }

mkdir -p "$DIR" && rm -rf "$DIR/state" "$DIR"/*.log "$DIR"/*.txt
go build -o "$BIN" ./cmd/gavel-slurm
SLURM_GPU_NODES="$NODES" scripts/slurm-up.sh
set -a; . .local/slurm/env; set +a
if [ "${SCALE_FRESH:-1}" = 1 ]; then
  # Leftovers of an earlier run would count as jobs.
  "$SCANCEL" -p "$SLURM_PARTITION" 2>/dev/null || true
  sleep 5
else
  # The daemon starts afresh (its state is removed above): the holds an
  # earlier run left would be taken for an administrator's.
  "$SQUEUE" -h -p "$SLURM_PARTITION" -t PD -o %i | xargs -r -n 500 | tr ' ' ',' | xargs -r -n 1 "$SCONTROL" release 2>/dev/null || true
fi
TAG="gavel: model=resnet50-bs64 steps=10M preempt=requeue"
have=$("$SQUEUE" -h -p "$SLURM_PARTITION" -t PD,R -o %k | grep -c "^$TAG" || true)
say "submitting $((JOBS - have)) tagged jobs ($have already there)"
t0=$(date +%s.%N)
scripts/scale-submit.py $((JOBS - have)) "$TAG" >"$DIR/submitted.txt" || say "some submissions failed"
say "submitted in $(echo "$(date +%s.%N) - $t0" | bc) s"

cat >"$DIR/gavel-slurm.toml" <<EOF
[slurm]
rest_url = "$SLURMRESTD_URL"
token_file = "$SLURM_JWT_FILE"
user = "$SLURM_USER_NAME"
partitions = ["$SLURM_PARTITION"]
scontrol = "$SCONTROL"
[scheduler]
policy = "$POLICY"
mechanism = "$MECHANISM"
round = "$ROUND"
min_run_time = "$ROUND"
default_preempt = "requeue"
[daemon]
state_dir = "$DIR/state"
listen = "$LISTEN"
EOF

# RPCs slurmctld served so far, by message type ("TYPE COUNT" lines).
rpcs() {
  "$(dirname "$SCONTROL")/in-slurm-root" sdiag |
    awk '/by message type/{on=1;next} /by user/{on=0} on && match($0, /count:[0-9]+/){print $1, substr($0, RSTART+6, RLENGTH-6)}'
}

# A second process times users' commands every second while rounds run.
probe() {
  while :; do
    local a b c
    a=$(date +%s.%N)
    "$SQUEUE" -h -o %i >/dev/null 2>&1 || true
    b=$(date +%s.%N)
    local id
    id=$("$SBATCH" --parsable -H -p "$SLURM_PARTITION" -o /dev/null --wrap true 2>/dev/null || true)
    c=$(date +%s.%N)
    [ -n "$id" ] && "$SCANCEL" "$id" 2>/dev/null
    printf '%s %.3f %.3f\n' "$a" "$(echo "$b - $a" | bc)" "$(echo "$c - $b" | bc)" >>"$DIR/probe.txt"
    sleep 1
  done
}

"$BIN" daemon --config "$DIR/gavel-slurm.toml" >"$DIR/daemon.log" 2>&1 &
DAEMON=$!
probe & PROBE=$!
# The daemon finishes the round in progress before it stops (a mass move
# may take minutes here): it gets 30 s, then is killed, so that no daemon
# of this run outlives it.
stop_all() {
  kill $PROBE $DAEMON 2>/dev/null || true
  for _ in $(seq 60); do kill -0 $DAEMON 2>/dev/null || return 0; sleep 0.5; done
  kill -9 $DAEMON 2>/dev/null || true
}
trap stop_all EXIT
rounds_done() { grep -c '"message":"round"' "$DIR/daemon.log" || true; }
sdiag_at() { rpcs >"$DIR/sdiag-$1.txt" 2>/dev/null || true; }
sdiag_at 0
n=0
while [ "$n" -lt "$ROUNDS" ]; do
  kill -0 $DAEMON 2>/dev/null || { say "FAILED: the daemon stopped"; tail -5 "$DIR/daemon.log"; exit 1; }
  m=$(rounds_done)
  if [ "$m" -gt "$n" ]; then n=$m; sdiag_at "$n"; say "round $n done"; fi
  sleep 0.5
done
rss=$(awk '/VmHWM/{print $2}' /proc/$DAEMON/status)
st0=$(date +%s.%N); "$BIN" status --server "$LISTEN" --json >/dev/null; st1=$(date +%s.%N)
kill $PROBE 2>/dev/null || true
# What each kind of read costs, asked as the daemon asks it.
api() { curl -s -o /dev/null -w '%{time_total} s, %{size_download} bytes' -H "X-SLURM-USER-NAME: $SLURM_USER_NAME" \
  -H "X-SLURM-USER-TOKEN: $(cat "$SLURM_JWT_FILE")" "$SLURMRESTD_URL/slurm/v0.0.$1"; }
v=$(echo "$SLURM_API_VERSIONS" | tr ' ' '\n' | tail -1 | sed 's/v0.0.//')
look_state=$(api "$v/jobs/state")
look_same=$(api "$v/jobs?update_time=$(($(date +%s) + 60))")
read_full=$(api "$v/jobs")

echo
echo "jobs=$JOBS nodes=\"$NODES\" round=$ROUND policy=$POLICY mechanism=$MECHANISM release=$SLURM_RELEASE load=\"$(cut -d' ' -f1-3 /proc/loadavg)\""
echo
echo "| round | jobs | actions | failed | snapshot s | step s | apply s | round s | slurmctld RPCs |"
echo "|---|---|---|---|---|---|---|---|---|"
i=0
grep '"message":"round"' "$DIR/daemon.log" | head -n "$ROUNDS" | while read -r line; do
  i=$((i + 1))
  get() { echo "$line" | sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p"; }
  total=$(join -a1 -a2 -e0 -o 0,1.2,2.2 <(sort "$DIR/sdiag-$((i - 1)).txt") <(sort "$DIR/sdiag-$i.txt") | awk '{s+=$3-$2} END{print s+0}')
  printf '| %d | %s | %s | %s | %.2f | %.2f | %.2f | %.2f | %s |\n' "$i" "$(get jobs)" "$(get actions)" "$(get failed)" \
    "$(echo "$(get snapshot_ms)/1000" | bc -l)" "$(echo "$(get step_ms)/1000" | bc -l)" "$(echo "$(get apply_ms)/1000" | bc -l)" \
    "$(echo "$(get round_ms)/1000" | bc -l)" "$total"
done
echo
looks=$(grep -c '"between rounds' "$DIR/daemon.log" || true)
echo "daemon peak RSS: $((rss / 1024)) MB; status --json: $(printf '%.2f' "$(echo "$st1 - $st0" | bc)") s; looks that acted: $looks"
sort -k2 -n "$DIR/probe.txt" | awk '{q[NR]=$2} END{printf "squeue latency over %d probes: median %.2f s, max %.2f s\n", NR, q[int((NR+1)/2)], q[NR]}'
sort -k3 -n "$DIR/probe.txt" | awk '{q[NR]=$3} END{printf "sbatch latency over %d probes: median %.2f s, max %.2f s\n", NR, q[int((NR+1)/2)], q[NR]}'
echo "reads: GET /jobs/state $look_state; GET /jobs unchanged since update_time $look_same; GET /jobs in full $read_full"
echo "RPCs per round include the probe's squeue, sbatch and scancel (about 3 a second) and the looks between rounds."
