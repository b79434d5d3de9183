#!/usr/bin/env bash
# Stops the local Slurm started by slurm-up.sh: every process inside the root
# (daemons, job steps, whatever jobs started), then every mount it made. The
# cached root stays for a fast restart; `rm -rf .local/slurm` after this
# removes it too.
set -euo pipefail
# shellcheck source=slurm/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/slurm/common.sh"

[ "$(id -u)" -eq 0 ] || exec sudo -E bash "${BASH_SOURCE[0]}" "$@"

if [ ! -d "$SLURM_ROOTFS" ]; then
  say "nothing to stop (no $SLURM_ROOTFS)"
  exit 0
fi
exec 9>"$SLURM_STATE/lock"
flock 9

rm -f "$SLURM_ENV_FILE" "$SLURM_STATE/running-config"

pids="$(root_pids)"
if [ -n "$pids" ]; then
  say "stopping $(wc -w <<<"$pids") processes inside the root"
  # shellcheck disable=SC2086 # one pid per word
  kill $pids 2>/dev/null || true
  for _ in $(seq 50); do
    pids="$(root_pids)"
    [ -n "$pids" ] || break
    sleep 0.1
  done
  if [ -n "$pids" ]; then
    # shellcheck disable=SC2086
    kill -9 $pids 2>/dev/null || true
    sleep 0.2
  fi
fi
[ -z "$(root_pids)" ] || fail "processes still running inside the root: $(root_pids | tr '\n' ' ')"

umount_all
[ -z "$(mounts_under)" ] || fail "still mounted: $(mounts_under | tr '\n' ' ')"
say "stopped; root kept in $SLURM_ROOTFS"
