#!/bin/sh
# Slurm Prolog for the gavel-slurm collector (slurm.conf: Prolog=, runs as
# root on each node of the job, before the job's first step there).
#
# It records which GPUs the job holds on this node, in
#   $GAVEL_JOBS_DIR/<jobid>       one line: the GPU indices, "0,1"
# and creates the job's progress file, owned by the job's user, in
#   $GAVEL_PROGRESS_DIR/<jobid>.progress
# which the job appends its step counts to (see gavel-taskprolog.sh).
#
# A Prolog that fails drains the node, so this one never fails: whatever
# goes wrong, the collector falls back on the GPUs' processes.

PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
umask 022

# Sites change these here (slurmd gives the Prolog its own environment).
GAVEL_JOBS_DIR=${GAVEL_JOBS_DIR:-/run/gavel-slurm/jobs}
GAVEL_PROGRESS_DIR=${GAVEL_PROGRESS_DIR:-/run/gavel-slurm/progress}

# owned_dir DIR creates DIR if missing and succeeds only if it and its
# parent are real directories owned by whoever runs this script (root,
# under slurmd) that no one else may write to. Whoever could write to
# either could swap a directory, or a file in it, for a link to a file of
# their choosing, which this script would then write as root.
owned_dir() {
	mkdir -p "$1" 2>/dev/null || return 1
	for d in "$1" "$(dirname "$1")"; do
		[ -d "$d" ] && [ ! -L "$d" ] && [ -O "$d" ] || return 1
		[ -z "$(find "$d" -maxdepth 0 -perm /022 2>/dev/null)" ] || return 1
	done
}

job=${SLURM_JOB_ID:-}
case $job in
'' | *[!0-9]*) exit 0 ;;
esac

# SLURM_JOB_GPUS holds the node's indices of the job's GPUs; without it
# (older Slurm), CUDA_VISIBLE_DEVICES as set for the Prolog. Keep only what
# GPU names are made of: no line of the file can be forged through them.
gpus=${SLURM_JOB_GPUS:-${CUDA_VISIBLE_DEVICES:-}}
gpus=$(printf '%s' "$gpus" | tr -cd '0-9A-Za-z,-')
case $gpus in
'' | NoDevFiles) exit 0 ;; # a job without GPUs: nothing to follow
esac

if owned_dir "$GAVEL_JOBS_DIR"; then
	# Written aside and renamed, so that the collector never reads half a
	# file; a new file (new inode) also tells it that a requeued job
	# started over. Created afresh (noclobber): never through a link.
	tmp="$GAVEL_JOBS_DIR/.$job.$$"
	rm -f "$tmp"
	if (set -C && printf '%s\n' "$gpus" >"$tmp") 2>/dev/null; then
		mv -f "$tmp" "$GAVEL_JOBS_DIR/$job" 2>/dev/null || rm -f "$tmp"
	fi
else
	echo "gavel-prolog: $GAVEL_JOBS_DIR or its parent is not a directory only root may write to; skipped" >&2
fi

# The directory stays root's (mode 0755): a user can append to their own
# job's file but not put a link or a file of their choosing in its place.
if owned_dir "$GAVEL_PROGRESS_DIR"; then
	progress="$GAVEL_PROGRESS_DIR/$job.progress"
	rm -f "$progress"
	if (set -C && : >"$progress") 2>/dev/null; then
		chmod 0600 "$progress" 2>/dev/null
		if [ -n "${SLURM_JOB_UID:-}" ]; then
			chown "$SLURM_JOB_UID" "$progress" 2>/dev/null || rm -f "$progress"
		fi
	fi
else
	echo "gavel-prolog: $GAVEL_PROGRESS_DIR or its parent is not a directory only root may write to; skipped" >&2
fi
exit 0
