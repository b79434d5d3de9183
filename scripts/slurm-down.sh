#!/usr/bin/env bash
# Stops the local Slurm started by slurm-up.sh, whichever release runs
# (SLURM_RELEASE does not matter here): in every release's root, every
# process (daemons, job steps, whatever jobs started), then every mount it
# made. Only processes whose root is one of this checkout's roots are
# touched. The cached roots stay for a fast restart; `rm -rf --one-file-system
# .local/slurm` after this removes them too.
#
#   slurm-down.sh           stop whichever release runs
#   slurm-down.sh RELEASE   stop only that release's root (24.11, 26.05);
#                           another release's stack and its env file stay
set -euo pipefail
# shellcheck source=slurm/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/slurm/common.sh"

[ "$(id -u)" -eq 0 ] || exec sudo -E bash "${BASH_SOURCE[0]}" "$@"

only="${1:-}"
mapfile -t roots < <(all_roots)
if [ -n "$only" ]; then
  mapfile -t roots < <(for root in "${roots[@]}"; do
    [ "$(release_of_root "$root")" != "$only" ] || printf '%s\n' "$root"
  done)
fi
if [ "${#roots[@]}" -eq 0 ]; then
  say "nothing to stop (no root${only:+ for $only} under $SLURM_STATE)"
  exit 0
fi
exec 9>"$SLURM_STATE/lock"
flock 9

# The env file promises a working stack: it goes first, unless it speaks
# for another release, which stays up.
others_up=0
if [ -n "$only" ]; then
  while read -r root; do
    [ "$(release_of_root "$root")" = "$only" ] || [ -z "$(root_pids "$root")" ] || others_up=1
  done < <(all_roots)
fi
if [ "$others_up" = 0 ] || [ "$(env_release)" = "$only" ]; then
  rm -f "$SLURM_ENV_FILE" "$SLURM_STATE/running-config" "$SLURM_STATE/running-dbd-config"
fi
kept=""
for root in "${roots[@]}"; do
  stop_root "$root"
  kept+="${kept:+, }${root##*/} ($(release_of_root "$root"))"
done
say "stopped; roots kept: $kept"
