#!/usr/bin/env bash
# Runs contrib/slurm/job_submit.lua inside a real slurmctld (Slurm 24.11
# from Debian trixie, JobSubmitPlugins=lua) and submits jobs to it with
# sbatch and scontrol, as root and as an ordinary user.
#
# The slurmctld is a private one, started for this run in its own Debian
# root under .local/job-submit-test (four free ports from 18817 up, its own munge key,
# no slurmd: jobs only queue), and stopped at the end. The shared test
# cluster of scripts/slurm-up.sh is not touched. Needs root; the first run
# needs the network (apt-get) and about two minutes, later runs about 20 s.
# By hand only, not part of `make test`.
#
#   SKIP_JOB_SUBMIT_TEST=1   skip, saying so
set -Eeuo pipefail
cd "$(dirname "$0")/.."

if [ "${SKIP_JOB_SUBMIT_TEST:-}" = 1 ]; then
	echo "job-submit-test: SKIPPED because SKIP_JOB_SUBMIT_TEST=1"
	exit 0
fi
[ "$(id -u)" -eq 0 ] || exec sudo -E bash "$0" "$@"

mirror=${PACKAGE_TEST_MIRROR:-http://deb.debian.org/debian}
state="$PWD/.local/job-submit-test"
root="$state/root"
packages="slurmctld slurm-client munge"
port= # chosen at start: see pick_port
started=$SECONDS

say() { printf 'job-submit-test: %s\n' "$*"; }
die() {
	printf 'job-submit-test: ERROR: %s\n' "$*" >&2
	exit 1
}

mkdir -p "$state"
exec 9>"$state/lock"
flock 9

in_root() { env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 chroot "$root" "$@"; }
as_user() { env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp LANG=C.UTF-8 chroot --userspec=alice:alice "$root" "$@"; }

build_root() {
	[ -f "$root/.gavel-root-done" ] && return
	rm -rf --one-file-system "$root"
	if [ -f .local/package-test/base-trixie/.gavel-base-done ]; then
		say "copying the package test's Debian root"
		cp -a .local/package-test/base-trixie "$root"
	else
		command -v debootstrap >/dev/null || die "debootstrap is missing (apt-get install debootstrap)"
		say "debootstrap trixie (minbase) into $root"
		debootstrap --variant=minbase trixie "$root" "$mirror" >"$state/debootstrap.log" 2>&1 ||
			die "debootstrap failed; log in $state/debootstrap.log"
		printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
		chmod 755 "$root/usr/sbin/policy-rc.d"
	fi
	cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
	say "installing $packages in the root"
	# shellcheck disable=SC2086 # one word per package
	in_root env DEBIAN_FRONTEND=noninteractive sh -c \
		"apt-get update -qq && apt-get install -y -qq --no-install-recommends $packages" >"$state/apt.log" 2>&1 ||
		die "apt-get failed; log in $state/apt.log"
	in_root useradd --uid 5001 --user-group --no-create-home --shell /bin/sh alice
	touch "$root/.gavel-root-done"
}

configure() {
	local host
	host=$(hostname -s)
	mkdir -p "$root/run/munge" "$root/run/slurm" "$root/var/spool/slurmctld" "$root/var/log/slurm"
	in_root chown munge:munge /run/munge
	in_root chown slurm:slurm /run/slurm /var/spool/slurmctld /var/log/slurm
	[ -s "$root/etc/munge/munge.key" ] || in_root mungekey --create --keyfile=/etc/munge/munge.key
	in_root chown munge:munge /etc/munge/munge.key
	chmod 0400 "$root/etc/munge/munge.key"
	# Nodes that never answer (no slurmd, ports nobody listens on): jobs
	# queue, which is all a submission check needs.
	cat >"$root/etc/slurm/slurm.conf" <<EOF
# Written by scripts/job-submit-test.sh: a private slurmctld for job_submit.lua.
ClusterName=gaveljs
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=slurm
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
GresTypes=gpu
JobRequeue=1
JobSubmitPlugins=lua
NodeName=gnode1 NodeAddr=127.0.0.1 Port=$((port + 2)) CPUs=4 Gres=gpu:v100:2 Feature=v100,ib State=UNKNOWN
NodeName=cnode1 NodeAddr=127.0.0.1 Port=$((port + 3)) CPUs=4 State=UNKNOWN
PartitionName=gpu Nodes=gnode1 State=UP
PartitionName=cpu Nodes=cnode1 Default=YES State=UP
EOF
	cp contrib/slurm/job_submit.lua "$root/etc/slurm/job_submit.lua"
	chmod 0644 "$root/etc/slurm/slurm.conf" "$root/etc/slurm/job_submit.lua"
	# A fresh queue each run.
	rm -rf "${root:?}/var/spool/slurmctld/"*
	: >"$root/var/log/slurm/slurmctld.log"
}

# pick_port finds four free TCP ports in a row for slurmctld, the slurmd
# port and the two nodes' ports: the nodes must not point at some other
# cluster's slurmd on this host.
pick_port() {
	local base p busy
	for base in 18817 19817 20817 21817 22817; do
		busy=0
		for p in $(seq "$base" $((base + 3))); do
			ss -Hltn "sport = :$p" | grep -q . && busy=1
		done
		[ "$busy" = 0 ] && {
			port=$base
			return
		}
	done
	die "no four free ports in a row from 18817 up"
}

pid_of() { [ -s "$root$1" ] && tr -dc 0-9 <"$root$1"; }

stop_all() {
	local pf pid
	for pf in /run/slurm/slurmctld.pid /run/munge/munged.pid; do
		pid=$(pid_of "$pf") || continue
		[ "$(readlink "/proc/$pid/root" 2>/dev/null)" = "$root" ] || continue
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 50); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
	done
	mountpoint -q "$root/proc" && umount "$root/proc"
	return 0
}

start_all() {
	mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
	env -i PATH=/usr/sbin:/usr/bin chroot --userspec=munge:munge "$root" /usr/sbin/munged \
		--pid-file=/run/munge/munged.pid </dev/null >/dev/null 2>&1 9>&-
	in_root /usr/sbin/slurmctld </dev/null >>"$state/slurmctld.stderr" 2>&1 9>&-
	for _ in $(seq 100); do
		in_root scontrol ping 2>/dev/null | grep -q UP && return 0
		sleep 0.2
	done
	tail -n 20 "$root/var/log/slurm/slurmctld.log" >&2
	die "slurmctld did not answer"
}

# ---------------------------------------------------------------- checks
failures=0
report() { # report OK|FAIL DESCRIPTION [DETAILS]
	printf '  %-4s  %s\n' "$1" "$2"
	[ -z "${3:-}" ] || printf '%s\n' "$3" | sed 's/^/        /'
	[ "$1" = ok ] || failures=$((failures + 1))
}

# submit USER PARTITION COMMENT [SBATCH ARGS...]: prints the job id, or the
# error sbatch printed.
submit() {
	local who=$1 partition=$2 comment=$3
	shift 3
	local run=in_root
	[ "$who" = alice ] && run=as_user
	$run sbatch --parsable --chdir=/tmp --output=/dev/null --partition="$partition" --comment="$comment" \
		"$@" --wrap="sleep 1" 2>&1 || true
}

field() { # field JOBID NAME
	in_root scontrol show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}

# text_field reads a field that may hold spaces (scontrol gives Comment and
# AdminComment a line each).
text_field() { # text_field JOBID NAME
	in_root scontrol show job "$1" | sed -n "s/^ *$2=//p" | sed 's/ *$//' | head -n 1
}

expect_job() { # expect_job DESCRIPTION OUTPUT FIELD=VALUE...
	local what=$1 out=$2 id want name value got
	shift 2
	id=$(printf '%s' "$out" | tail -n 1)
	if ! [[ $id =~ ^[0-9]+$ ]]; then
		report FAIL "$what" "refused: $out"
		return
	fi
	for want in "$@"; do
		name=${want%%=*} value=${want#*=}
		got=$(field "$id" "$name")
		if [ "$got" != "$value" ]; then
			report FAIL "$what" "job $id: $name=$got, want $value"
			return
		fi
	done
	report ok "$what" "job $id: $*"
}

expect_refused() { # expect_refused DESCRIPTION OUTPUT MESSAGE
	if grep -qF -- "$3" <<<"$2" && ! [[ $(tail -n 1 <<<"$2") =~ ^[0-9]+$ ]]; then
		report ok "$1" "$(grep -F -- "$3" <<<"$2")"
	else
		report FAIL "$1" "got: $2"
	fi
}

trap stop_all EXIT
build_root
stop_all
pick_port
configure
start_all
say "slurmctld $(in_root scontrol --version | cut -d' ' -f2) with JobSubmitPlugins=lua on port $port"

out=$(submit alice gpu "nightly; gavel: model=resnet50 STEPS=1.5k slo=1-12" --no-requeue)
expect_job "valid tag: accepted, made requeueable, canonical tag in AdminComment" "$out" \
	"Requeue=1" "AdminComment=gavel:" "Comment=nightly;"
id=$(tail -n 1 <<<"$out")
ac=$(text_field "$id" AdminComment)
if [ "$ac" = "gavel: model=resnet50 steps=1500 slo=36h" ]; then
	report ok "AdminComment holds the daemon's canonical form of the tag" "AdminComment=$ac"
else
	report FAIL "AdminComment holds the daemon's canonical form of the tag" "AdminComment=$ac"
fi

out=$(submit alice gpu "gavel: model=resnet50 steps=lots")
expect_refused "malformed tag refused with the daemon's message" "$out" \
	'gavel-slurm: not managed: steps= is not a number: "lots"'

out=$(submit alice cpu "gavel: steps=lots")
expect_job "malformed tag in an unscheduled partition: untouched" "$out" "Partition=cpu"

out=$(submit alice gpu "no tag here" --no-requeue)
expect_job "job without a tag: untouched" "$out" "Requeue=0"

# Updates: the user's own comment change, and the daemon's kind (as root).
out=$(as_user scontrol update jobid="$id" comment="gavel: steps=x" 2>&1) && rc=0 || rc=$?
if [ "$rc" -ne 0 ] && grep -qF 'gavel-slurm: not managed: steps= is not a number: "x"' <<<"$out"; then
	report ok "user's comment update with a malformed tag refused" "$out"
else
	report FAIL "user's comment update with a malformed tag refused" "rc $rc: $out"
fi
# Slurm lets only administrators change an AdminComment, even through the
# script: a user's new tag is checked, the copy keeps the submitted tag;
# root's change refreshes it.
out=$(as_user scontrol update jobid="$id" comment="gavel: model=vgg16 steps=2000" 2>&1) && rc=0 || rc=$?
ac=$(text_field "$id" AdminComment)
if [ "$rc" -eq 0 ] && [ "$(text_field "$id" Comment)" = "gavel: model=vgg16 steps=2000" ] &&
	[ "$ac" = "gavel: model=resnet50 steps=1500 slo=36h" ]; then
	report ok "user's valid comment update accepted, AdminComment keeps the submitted tag" "AdminComment=$ac"
else
	report FAIL "user's valid comment update accepted, AdminComment keeps the submitted tag" "rc $rc: $out; AdminComment=$ac"
fi
out=$(in_root scontrol update jobid="$id" comment="gavel: model=vgg16 steps=3k" 2>&1) && rc=0 || rc=$?
ac=$(text_field "$id" AdminComment)
if [ "$rc" -eq 0 ] && [ "$ac" = "gavel: model=vgg16 steps=3000" ]; then
	report ok "root's comment update refreshes the AdminComment" "AdminComment=$ac"
else
	report FAIL "root's comment update refreshes the AdminComment" "rc $rc: $out; AdminComment=$ac"
fi
# The scheduler preempts by requeueing: the owner may not turn it off.
out=$(as_user scontrol update jobid="$id" requeue=0 2>&1) && rc=0 || rc=$?
if [ "$rc" -ne 0 ] && grep -qF 'gavel-slurm: requeue=0 refused' <<<"$out" && [ "$(field "$id" Requeue)" = 1 ]; then
	report ok "user's requeue=0 on a managed job refused" "$out"
else
	report FAIL "user's requeue=0 on a managed job refused" "rc $rc: $out; Requeue=$(field "$id" Requeue)"
fi
out=$(in_root scontrol update jobid="$id" priority=4242 features=v100 2>&1) && rc=0 || rc=$?
if [ "$rc" -eq 0 ] && [ "$(field "$id" Priority)" = 4242 ]; then
	report ok "the daemon's kind of update (priority, constraint) passes" "Priority=4242 Features=$(field "$id" Features)"
else
	report FAIL "the daemon's kind of update (priority, constraint) passes" "rc $rc: $out"
fi

# The optional rewrite of typed requests: switched on in the installed
# copy; slurmctld reloads the script when it changes.
sed -i 's/untype_gpu_requests = false/untype_gpu_requests = true/' "$root/etc/slurm/job_submit.lua"
touch -d '+2 seconds' "$root/etc/slurm/job_submit.lua"
out=$(submit alice gpu "gavel: model=x" --gres=gpu:v100:1)
expect_job "typed request made untyped plus a constraint (option on)" "$out" \
	"TresPerNode=gres/gpu:1" "Features=v100"
out=$(submit alice gpu "gavel: model=x" --gres=gpu:v100:1 --constraint="ib|v100")
expect_job "typed request kept when the constraint has |" "$out" "TresPerNode=gres/gpu:v100:1"

if grep -q 'job_submit/lua.*error' "$root/var/log/slurm/slurmctld.log"; then
	report FAIL "no Lua errors in slurmctld.log" "$(grep 'job_submit/lua.*error' "$root/var/log/slurm/slurmctld.log" | tail -n 5)"
else
	report ok "no Lua errors in slurmctld.log"
fi

if [ "$failures" -gt 0 ]; then
	say "$failures check(s) FAILED ($((SECONDS - started))s); slurmctld log: $root/var/log/slurm/slurmctld.log"
	exit 1
fi
say "all checks passed in $((SECONDS - started))s"
