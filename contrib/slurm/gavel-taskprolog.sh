#!/bin/sh
# Slurm TaskProlog for the gavel-slurm collector (slurm.conf: TaskProlog=,
# runs as the job's user before each task). A TaskProlog's output lines
# of the form "export NAME=value" become the task's environment: this one
# tells the job where to append its progress,
#
#   GAVEL_PROGRESS_FILE=/run/gavel-slurm/progress/<jobid>.progress
#
# when gavel-prolog.sh created that file for the job. A job writes lines
# "STEPS [UNIX_TIME]" to it (contrib/python/gavel_progress does it for
# Python training loops).

PATH=/usr/bin:/bin
GAVEL_PROGRESS_DIR=${GAVEL_PROGRESS_DIR:-/run/gavel-slurm/progress}

job=${SLURM_JOB_ID:-}
case $job in
'' | *[!0-9]*) exit 0 ;;
esac
progress="$GAVEL_PROGRESS_DIR/$job.progress"
if [ -f "$progress" ] && [ -w "$progress" ]; then
	echo "export GAVEL_PROGRESS_FILE=$progress"
fi
exit 0
