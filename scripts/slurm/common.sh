# Shared settings and helpers for slurm-up.sh / slurm-down.sh. Sourced, not run.
#
# Everything lives under .local/slurm/ in the repository:
#   root/     a Debian trixie tree (debootstrap) holding Slurm 24.11; cached
#   shared/   bind-mounted at /shared inside root: job scripts and their files
#   bin/      wrappers (sbatch, scontrol, ...) that run inside root
#   log/      daemon logs (slurmctld, one slurmd per node, slurmrestd, munged)
#   env       shell assignments for tests; present only while the stack works
#
# Settings (environment variables, all optional):
#   SLURM_GPU_NODES  node groups "type:nodes:gpus_per_node ..."
#                    (default "v100:2:4 p100:2:4 k80:2:4")
#   SLURM_CPUS_PER_NODE    CPUs each node claims (default 16)
#   SLURMCTLD_PORT         default 16817
#   SLURMD_PORT_BASE       first slurmd port, one per node (default 16900)
#   SLURMRESTD_PORT        default 16820 (listens on 127.0.0.1 only)
#   SLURM_DEBIAN_MIRROR    default http://deb.debian.org/debian
#   SLURM_TOKEN_LIFESPAN   seconds (default 315360000, ten years)

SLURM_REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SLURM_STATE="$SLURM_REPO_ROOT/.local/slurm"
SLURM_ROOTFS="$SLURM_STATE/root"
SLURM_HOST_SHARED="$SLURM_STATE/shared"
SLURM_JOB_SHARED="/shared"
SLURM_BIN="$SLURM_STATE/bin"
SLURM_LOG="$SLURM_STATE/log"
SLURM_ENV_FILE="$SLURM_STATE/env"
SLURM_TEMPLATES="$SLURM_REPO_ROOT/scripts/slurm"

SLURM_GPU_NODES="${SLURM_GPU_NODES:-v100:2:4 p100:2:4 k80:2:4}"
SLURM_CPUS_PER_NODE="${SLURM_CPUS_PER_NODE:-16}"
SLURMCTLD_PORT="${SLURMCTLD_PORT:-16817}"
SLURMD_PORT_BASE="${SLURMD_PORT_BASE:-16900}"
SLURMRESTD_PORT="${SLURMRESTD_PORT:-16820}"
SLURM_DEBIAN_MIRROR="${SLURM_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SLURM_TOKEN_LIFESPAN="${SLURM_TOKEN_LIFESPAN:-315360000}"
SLURM_TOKEN_USER="root"

# Packages installed inside the root. The marker file records this list so a
# changed list triggers another apt-get run on the next start.
SLURM_PACKAGES="slurmctld slurmd slurmrestd slurm-client munge slurm-wlm-jwt-plugin"

# Inside the root, daemon logs go to /var/log/slurm, bind-mounted from log/.
SLURM_LOG_IN_ROOT="/var/log/slurm"

say() { printf 'slurm: %s\n' "$*"; }
fail() {
  printf 'slurm: ERROR: %s\n' "$*" >&2
  # slurm-up.sh sets this once it starts changing things: the stack may then
  # be broken, so the env file must not promise otherwise.
  [ -z "${SLURM_WITHDRAW_ENV_ON_FAIL:-}" ] || rm -f "$SLURM_ENV_FILE"
  exit 1
}

# The mixed node: one node with GPUs of two types, in a partition of its
# own ("mixed"), so tests can submit jobs whose GRES names several types
# (Slurm refuses them where no node has both) without touching the
# one-type nodes of the main partition.
SLURM_MIXED_NODE=mix-1
SLURM_MIXED_PARTITION=mixed
SLURM_MIXED_GRES="v100:1 k80:1"

# all_nodes_list is nodes_list plus the mixed node, whose type is "mixed"
# and GPU count the sum of its GRES.
all_nodes_list() {
  local last="" name type gpus port total=0 g
  while read -r name type gpus port; do
    printf '%s %s %s %s\n' "$name" "$type" "$gpus" "$port"
    last=$port
  done < <(nodes_list)
  for g in $SLURM_MIXED_GRES; do total=$((total + ${g##*:})); done
  printf '%s mixed %s %s\n' "$SLURM_MIXED_NODE" "$total" "$((${last:-$SLURMD_PORT_BASE} + 1))"
}

# nodes_list prints "name type gpus port" for every configured node.
nodes_list() {
  local group type count gpus i port="$SLURMD_PORT_BASE"
  for group in $SLURM_GPU_NODES; do
    IFS=: read -r type count gpus <<<"$group"
    [[ "$type" =~ ^[a-z0-9]+$ && "$count" =~ ^[0-9]+$ && "$gpus" =~ ^[1-9][0-9]*$ ]] ||
      fail "bad SLURM_GPU_NODES entry '$group' (want type:nodes:gpus, e.g. v100:2:4)"
    for ((i = 1; i <= count; i++)); do
      printf '%s %s %s %s\n' "$type-$i" "$type" "$gpus" "$port"
      port=$((port + 1))
    done
  done
}

# in_root runs a command inside the root with a clean environment: no
# SLURM_JWT (slurmctld dies on it) and nothing else from the caller.
in_root() {
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    SLURM_CONF=/etc/slurm/slurm.conf chroot "$SLURM_ROOTFS" "$@"
}

# pid_alive PIDFILE NAME: true when the pid file names a live process whose
# command name is NAME and whose root is our tree (not some other process that
# reused the pid).
pid_alive() {
  local pidfile="$1" name="$2" pid
  [ -s "$pidfile" ] || return 1
  pid="$(tr -dc 0-9 <"$pidfile")"
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  [ "$(readlink "/proc/$pid/root" 2>/dev/null)" = "$SLURM_ROOTFS" ] || return 1
  # comm, not exe: Debian installs the binaries as slurmctld-wlm etc.
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ]
}

# root_pids lists every process running inside the root: daemons, job steps
# and anything the jobs started.
root_pids() {
  local p
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$SLURM_ROOTFS" ] && printf '%s\n' "${p#/proc/}"
  done
  return 0
}

# mounts_under prints mount points inside the root, deepest first.
mounts_under() {
  findmnt -rn -o TARGET | awk -v r="$SLURM_ROOTFS" 'index($0, r "/") == 1 || $0 == r' | sort -r
}

umount_all() {
  local m
  for m in $(mounts_under); do
    umount "$m" 2>/dev/null || umount -l "$m" || fail "cannot unmount $m"
  done
}

fail_with_logs() {
  show_logs
  fail "$@"
}

# show_logs prints the tail of every daemon log, to explain a failure.
show_logs() {
  local f
  for f in "$SLURM_LOG"/*.log "$SLURM_ROOTFS/var/log/munge/munged.log"; do
    [ -f "$f" ] || continue
    printf '\n===== %s (last 25 lines) =====\n' "$f" >&2
    tail -n 25 "$f" >&2
  done
}
