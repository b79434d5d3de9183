#!/usr/bin/env bash
# Captures the job accounting records that internal/history parses, from the
# local Slurm that scripts/slurm-up.sh runs (whichever release is up):
#
#   bash scripts/capture-history-fixtures.sh
#
# It submits one job of each kind the parser must tell apart, waits until
# they end (about half a minute), and writes
#
#   internal/history/testdata/sacct-RELEASE.json   sacct --json of those jobs
#   internal/history/testdata/rest-VERSION.json    slurmrestd's
#       GET /slurmdb/VERSION/jobs for the same window, newest API version
#       the release serves, kept to those jobs, asked as
#       rest.Client.JobHistory asks (times not cut to the window, no steps)
#
# Rerunning it submits new jobs and overwrites both files (their ids and
# times change; the tests read the kinds from names and fields, not ids).
# The jobs, all in partition gpu unless said, are named after their kind:
#
#   typed      --gres=gpu:v100:1                 COMPLETED
#   untyped    --gres=gpu:2                      COMPLETED
#   array      --array=0-2 --gres=gpu:1          3 tasks, COMPLETED
#   alice      as alice (uid 5001), gpu:p100:1   COMPLETED, account physics
#   bob        as bob (uid 5002), gpu:k80:1      COMPLETED, account biology
#   tagged     --comment 'gavel: model=resnet50 steps=1000'
#   fails      exits 1                           FAILED
#   cancelled  held, then scancel                CANCELLED, never started
#   requeued   scontrol requeue while running    restart_cnt 1, COMPLETED
#   cpu        no GPU                            COMPLETED
#   het        heterogeneous, gpu:1 + gpu:v100:1 two components
#   running    still running at capture time     RUNNING (cancelled after)
#
# Records are trimmed with jq (steps keep their ids and TRES, the batch
# script and environment go); nothing the parser reads is removed.
set -Eeuo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
env_file="$repo/.local/slurm/env"
[ -r "$env_file" ] || {
  echo "no $env_file: start the local Slurm first (scripts/slurm-up.sh)" >&2
  exit 1
}
set -a
# shellcheck disable=SC1090
source "$env_file"
set +a
[ "${SLURM_ACCOUNTING:-0}" = 1 ] || {
  echo "the local Slurm runs without accounting: nothing to capture" >&2
  exit 1
}
command -v jq >/dev/null || {
  echo "jq is needed" >&2
  exit 1
}

out="$repo/internal/history/testdata"
mkdir -p "$out"
part=${SLURM_PARTITION:-gpu}
# API version of the REST capture: the newest the release serves.
version=${SLURM_API_VERSIONS##* }

ids=()
running_id=""
cleanup() { [ -z "$running_id" ] || "$SCANCEL" "$running_id" 2>/dev/null || true; }
trap cleanup EXIT

# submit NAME SBATCH_ARGS...: submits a short job named NAME; its id is
# added to ids and left in last.
last=""
submit() {
  local name=$1
  shift
  last=$("$SBATCH" --parsable -J "$name" -p "$part" -t 5 -o /dev/null "$@")
  last=${last%%;*}
  ids+=("$last")
}

# state ID: the job's state in slurmctld ("" once it has left the queue).
state() { "$SQUEUE" -h -j "$1" -o %T 2>/dev/null | head -n 1 || true; }

# The window starts a second before the first submission.
start_epoch=$(($(date +%s) - 1))
start_iso=$(date -d "@$start_epoch" +%Y-%m-%dT%H:%M:%S)

submit typed --gres=gpu:v100:1 --wrap 'sleep 3'
submit untyped --gres=gpu:2 --wrap 'sleep 3'
submit array --array=0-2 --gres=gpu:1 --wrap 'sleep 3'
submit alice --uid=5001 --gid=5001 --gres=gpu:p100:1 --wrap 'sleep 3'
submit bob --uid=5002 --gid=5002 --gres=gpu:k80:1 --wrap 'sleep 3'
submit tagged --gres=gpu:1 --comment 'gavel: model=resnet50 steps=1000' --wrap 'sleep 3'
submit fails --gres=gpu:1 --wrap 'sleep 1; exit 1'
submit cancelled -H --gres=gpu:1 --wrap 'sleep 3'
cancelled=$last
submit requeued --gres=gpu:1 --wrap 'sleep 6'
requeued=$last
submit cpu --wrap 'sleep 2'
submit het --gres=gpu:1 : -p "$part" --gres=gpu:v100:1 --wrap 'sleep 3'
submit running --gres=gpu:1 --wrap 'sleep 300'
running_id=$last

sleep 1
"$SCANCEL" "$cancelled"

# Requeue once, while it runs; slurmctld delays a requeued job's next start.
for _ in $(seq 1 100); do
  [ "$(state "$requeued")" = RUNNING ] && break
  sleep 0.2
done
[ "$(state "$requeued")" = RUNNING ] || {
  echo "job $requeued did not start" >&2
  exit 1
}
sleep 1
"$SCONTROL" requeue "$requeued"

# Wait for every job but the running one to leave the queue (a requeued
# job waits its begin time first: up to a few minutes on some releases).
deadline=$((SECONDS + 300))
while :; do
  left=()
  for id in "${ids[@]}"; do
    [ "$id" = "$running_id" ] && continue
    [ -z "$("$SQUEUE" -h -j "$id" -o %i 2>/dev/null || true)" ] || left+=("$id")
  done
  [ "${#left[@]}" -eq 0 ] && break
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "jobs still in the queue: ${left[*]}" >&2
    exit 1
  fi
  sleep 2
done
[ "$(state "$running_id")" = RUNNING ] || {
  echo "job $running_id is not running" >&2
  exit 1
}
# slurmdbd takes the last end records a moment after slurmctld.
sleep 2
end_epoch=$(($(date +%s) + 1))

ids_json=$(printf '%s\n' "${ids[@]}" | jq -s 'map(tonumber)')
# keep: the records of our jobs (array tasks and het components carry the
# id of their first record in array.job_id / het.job_id), trimmed.
keep='
  .jobs |= map(select(.job_id as $j | .array.job_id as $a | .het.job_id as $h
                 | $ids | any(. == $j or . == $a or . == $h)))
  | .jobs |= map(del(.script, .environment)
                 | .steps |= map({step, state, time, exit_code, nodes, tres: {allocated: .tres.allocated}}))
'

ids_csv=$(IFS=,; echo "${ids[*]}")
"$SACCT" --json -S "$start_iso" -j "$ids_csv" |
  jq --argjson ids "$ids_json" "$keep" >"$out/sacct-$SLURM_RELEASE.json"

token=$(sed 's/^SLURM_JWT=//' "$SLURM_JWT_FILE")
curl -fsS -H "X-SLURM-USER-NAME: $SLURM_USER_NAME" -H "X-SLURM-USER-TOKEN: $token" \
  "$SLURMRESTD_URL/slurmdb/$version/jobs?start_time=$start_epoch&end_time=$end_epoch&disable_truncate_usage_time=true&skip_steps=true" |
  jq --argjson ids "$ids_json" "$keep" >"$out/rest-$version.json"

for f in "$out/sacct-$SLURM_RELEASE.json" "$out/rest-$version.json"; do
  printf '%s: %s records, %s bytes\n' "$f" "$(jq '.jobs | length' "$f")" "$(wc -c <"$f")"
done
