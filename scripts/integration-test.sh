#!/usr/bin/env bash
# Integration tests against a real local Slurm 24.11: brings it up (see
# scripts/slurm-up.sh), exports the settings from .local/slurm/env and runs
# every Go test with the `integration` build tag.
#
#   SKIP_SLURM=1   skip everything (machines that cannot run Slurm; CI must not set it)
#   KEEP_SLURM=1   leave Slurm running afterwards even if this run started it
#
# Slurm is stopped on exit only when this run started it: a Slurm that was
# already up (someone else's tests may be using it) stays up.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${SKIP_SLURM:-}" = 1 ]; then
  echo "integration: SKIPPED because SKIP_SLURM=1 (no Slurm integration tests ran)"
  exit 0
fi

was_up=0
[ -f .local/slurm/env ] && was_up=1

stop_if_started() {
  if [ "$was_up" = 0 ] && [ "${KEEP_SLURM:-}" != 1 ]; then
    echo "integration: stopping the Slurm this run started"
    bash scripts/slurm-down.sh || echo "integration: slurm-down failed" >&2
  fi
}
trap stop_if_started EXIT

echo "integration: bringing up the local Slurm"
bash scripts/slurm-up.sh

set -a
# shellcheck source=/dev/null
source .local/slurm/env
set +a

echo "integration: go test -tags integration ${INTEGRATION_PACKAGES:-./...} against $SLURMRESTD_URL"
# INTEGRATION_PACKAGES narrows the run while working on one package. -p 1:
# the packages share one small cluster, so they take turns rather than
# competing for its GPUs.
go test -count=1 -p 1 -timeout 40m -tags integration ${INTEGRATION_PACKAGES:-./...}
