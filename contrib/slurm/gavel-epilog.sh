#!/bin/sh
# Slurm Epilog for the gavel-slurm collector (slurm.conf: Epilog=, runs as
# root on each node of the job when it ends, or is requeued): removes what
# gavel-prolog.sh created, so that the collector stops reporting the job
# and a requeued run starts with a fresh progress file.
#
# An Epilog that fails drains the node, so this one never fails.

PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH

GAVEL_JOBS_DIR=${GAVEL_JOBS_DIR:-/run/gavel-slurm/jobs}
GAVEL_PROGRESS_DIR=${GAVEL_PROGRESS_DIR:-/run/gavel-slurm/progress}

job=${SLURM_JOB_ID:-}
case $job in
'' | *[!0-9]*) exit 0 ;;
esac

# Only in directories no one but root may write to (as in gavel-prolog.sh):
# elsewhere the names could lead anywhere.
safe() {
	for d in "$1" "$(dirname "$1")"; do
		[ -d "$d" ] && [ ! -L "$d" ] && [ -O "$d" ] || return 1
		[ -z "$(find "$d" -maxdepth 0 -perm /022 2>/dev/null)" ] || return 1
	done
}
safe "$GAVEL_JOBS_DIR" && rm -f "$GAVEL_JOBS_DIR/$job" 2>/dev/null
safe "$GAVEL_PROGRESS_DIR" && rm -f "$GAVEL_PROGRESS_DIR/$job.progress" 2>/dev/null
exit 0
