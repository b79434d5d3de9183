# Shared settings and helpers for slurm-up.sh / slurm-down.sh. Sourced, not run.
#
# Everything lives under .local/slurm/ in the repository:
#   root/     a Debian trixie tree (debootstrap) holding Slurm 24.11; cached
#   root-26.05/  a Debian sid tree holding Slurm 26.05; cached
#   shared/   bind-mounted at /shared inside root: job scripts and their files
#   shared-26.05/  the same for root-26.05
#   bin/      wrappers (sbatch, scontrol, ...) that run inside root
#   log/      daemon logs (slurmctld, one slurmd per node, slurmrestd, munged)
#   env       shell assignments for tests; present only while the stack works
#
# Settings (environment variables, all optional):
#   SLURM_RELEASE    which Slurm: 24.11 (default) or 26.05. Each release has
#                    its own cached root; one stack runs at a time, and
#                    slurm-up.sh refuses to start one release while the other
#                    runs (SLURM_SWITCH=1 stops the other one first)
#   SLURM_GPU_NODES  node groups "type:nodes:gpus_per_node ..."
#                    (default "v100:2:4 p100:2:4 k80:2:4")
#   SLURM_GPU_SHARDS "type:shards_per_gpu ..." (default empty: no
#                    sharing): the nodes of each type named also offer
#                    their GPUs as gres/shard, that many shards per GPU
#                    ("v100:2 p100:2")
#   SLURM_SHARD_FLAGS one_sharing (default: shards use one GPU of a node at
#                    a time, so shard jobs on one node share a GPU) or none
#                    (shards may use every GPU; Slurm takes the first GPU
#                    with room). Slurm applies the flag to every node
#   SLURM_CPUS_PER_NODE    CPUs each node claims (default 16)
#   SLURMCTLD_PORT         default 16817
#   SLURMD_PORT_BASE       first slurmd port, one per node (default 16900)
#   SLURMRESTD_PORT        default 16820 (listens on 127.0.0.1 only)
#   SLURM_DEBIAN_MIRROR    default http://deb.debian.org/debian
#   SLURM_TOKEN_LIFESPAN   seconds (default 315360000, ten years)
#   SLURM_ACCOUNTING 1 (default): slurmdbd with MariaDB inside the root,
#                    fair-share, the account tree of scripts/slurm/accounts.sh;
#                    0: no accounting (accounting_storage/none, no sacct)
#   SLURMDBD_PORT          default 16819

SLURM_REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SLURM_STATE="$SLURM_REPO_ROOT/.local/slurm"

# The releases the scripts know, each with its Debian suite, root and
# shared folder. 24.11 keeps the old names (.local/slurm/root and shared)
# so that existing caches and a stack started before releases existed are
# still found. Each root numbers its jobs from 1 on, and tests and the demo
# name files in the shared folder after job ids: each root has its own
# shared folder, emptied when its root is built afresh, so that no job
# finds the files of an earlier job with its id.
SLURM_KNOWN_RELEASES="24.11 26.05"
SLURM_RELEASE="${SLURM_RELEASE:-24.11}"
case "$SLURM_RELEASE" in
24.11)
  SLURM_DEBIAN_SUITE=trixie
  SLURM_ROOTFS="$SLURM_STATE/root"
  SLURM_HOST_SHARED="$SLURM_STATE/shared"
  SLURM_APT_OPTIONS=""
  ;;
26.05)
  # Bookworm's debootstrap has no script for forky (testing) but has one
  # for sid, which ships the same Slurm. The mirror's sid Release file may
  # be past its Valid-Until date (a frozen snapshot): apt must not care.
  SLURM_DEBIAN_SUITE=sid
  SLURM_ROOTFS="$SLURM_STATE/root-26.05"
  SLURM_HOST_SHARED="$SLURM_STATE/shared-26.05"
  SLURM_APT_OPTIONS="-o Acquire::Check-Valid-Until=false"
  ;;
*)
  # slurm-up.sh refuses it (check_release); slurm-down.sh stops every root.
  SLURM_DEBIAN_SUITE=""
  SLURM_ROOTFS="$SLURM_STATE/root-$SLURM_RELEASE"
  SLURM_HOST_SHARED="$SLURM_STATE/shared-$SLURM_RELEASE"
  SLURM_APT_OPTIONS=""
  ;;
esac
SLURM_JOB_SHARED="/shared"
SLURM_BIN="$SLURM_STATE/bin"
SLURM_LOG="$SLURM_STATE/log"
SLURM_ENV_FILE="$SLURM_STATE/env"
SLURM_TEMPLATES="$SLURM_REPO_ROOT/scripts/slurm"

SLURM_GPU_NODES="${SLURM_GPU_NODES:-v100:2:4 p100:2:4 k80:2:4}"
SLURM_CPUS_PER_NODE="${SLURM_CPUS_PER_NODE:-16}"
SLURM_GPU_SHARDS="${SLURM_GPU_SHARDS:-}"
SLURM_SHARD_FLAGS="${SLURM_SHARD_FLAGS:-one_sharing}"
SLURMCTLD_PORT="${SLURMCTLD_PORT:-16817}"
SLURMD_PORT_BASE="${SLURMD_PORT_BASE:-16900}"
SLURMRESTD_PORT="${SLURMRESTD_PORT:-16820}"
SLURM_DEBIAN_MIRROR="${SLURM_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SLURM_TOKEN_LIFESPAN="${SLURM_TOKEN_LIFESPAN:-315360000}"
SLURM_TOKEN_USER="root"
SLURM_ACCOUNTING="${SLURM_ACCOUNTING:-1}"
SLURMDBD_PORT="${SLURMDBD_PORT:-16819}"

# Packages installed inside the root. The marker file records this list so a
# changed list triggers another apt-get run on the next start.
SLURM_PACKAGES="slurmctld slurmd slurmrestd slurm-client munge slurm-wlm-jwt-plugin"
# Accounting as sites run it: slurmdbd (which pulls in the MySQL plugin)
# in front of MariaDB.
[ "$SLURM_ACCOUNTING" = 0 ] || SLURM_PACKAGES+=" slurmdbd mariadb-server"
# The LP solver's library, which gavel-slurm links: jobs that run the
# binary on the nodes (whatif --submit) need it there, as on a site.
SLURM_PACKAGES+=" coinor-libclp1"

# Inside the root, daemon logs go to /var/log/slurm, bind-mounted from log/.
SLURM_LOG_IN_ROOT="/var/log/slurm"

say() { printf 'slurm: %s\n' "$*"; }

check_release() {
  [ -n "$SLURM_DEBIAN_SUITE" ] ||
    fail "unknown SLURM_RELEASE '$SLURM_RELEASE' (known: $SLURM_KNOWN_RELEASES)"
  case "$SLURM_ACCOUNTING" in
  0 | 1) ;;
  *) fail "bad SLURM_ACCOUNTING '$SLURM_ACCOUNTING' (want 1 or 0)" ;;
  esac
}

# all_roots prints every release's root that exists under .local/slurm.
all_roots() {
  local d
  for d in "$SLURM_STATE/root" "$SLURM_STATE"/root-*; do
    [ -d "$d" ] && printf '%s\n' "$d"
  done
  return 0
}

# release_of_root ROOT: the release a root holds, from its name.
release_of_root() {
  case "${1##*/}" in
  root) printf '24.11' ;;
  root-*) printf '%s' "${1##*/root-}" ;;
  *) printf '?' ;;
  esac
}
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

# shards_per_gpu TYPE prints how many shards each GPU of that type offers
# (SLURM_GPU_SHARDS), 0 when its nodes do not share GPUs.
shards_per_gpu() {
  local entry t n
  for entry in $SLURM_GPU_SHARDS; do
    IFS=: read -r t n <<<"$entry"
    [[ "$t" =~ ^[a-z0-9]+$ && "$n" =~ ^[1-9][0-9]*$ ]] ||
      fail "bad SLURM_GPU_SHARDS entry '$entry' (want type:shards_per_gpu, e.g. v100:2)"
    if [ "$t" = "$1" ]; then
      printf '%s' "$n"
      return
    fi
  done
  printf 0
}

# check_shard_flags: SLURM_SHARD_FLAGS is one_sharing or none.
check_shard_flags() {
  case "$SLURM_SHARD_FLAGS" in
  one_sharing | none) ;;
  *) fail "bad SLURM_SHARD_FLAGS '$SLURM_SHARD_FLAGS' (want one_sharing or none)" ;;
  esac
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

# root_pids [ROOT] lists every process running inside the root (default:
# this release's): daemons, job steps and anything the jobs started. Only
# processes whose root is exactly that folder: nothing outside this
# checkout's tree is ever listed.
root_pids() {
  local root="${1:-$SLURM_ROOTFS}"
  # One pass over /proc: a readlink per process took minutes with the
  # 20,000 processes of a large scale run on a loaded machine.
  find /proc -mindepth 2 -maxdepth 2 -name root -path '/proc/[0-9]*/root' -printf '%h\t%l\n' 2>/dev/null |
    awk -F'\t' -v r="$root" '$2 == r { print substr($1, 7) }'
  return 0
}

# mounts_under [ROOT] prints mount points inside the root, deepest first.
mounts_under() {
  findmnt -rn -o TARGET | awk -v r="${1:-$SLURM_ROOTFS}" 'index($0, r "/") == 1 || $0 == r' | sort -r
}

umount_all() {
  local m
  for m in $(mounts_under "${1:-}"); do
    umount "$m" 2>/dev/null || umount -l "$m" || fail "cannot unmount $m"
  done
}

# env_release prints the release the env file speaks for ("" when there is
# no env file; an env file from before releases existed is 24.11's).
env_release() {
  [ -f "$SLURM_ENV_FILE" ] || return 0
  local r
  r="$(sed -n 's/^SLURM_RELEASE=//p' "$SLURM_ENV_FILE")"
  printf '%s' "${r:-24.11}"
}

# stop_root ROOT stops the stack of one root: every process inside the root
# gets SIGTERM, SIGKILL after 5 s, then every mount is undone. The caller
# holds the lock and has removed the env file if it spoke for this root.
stop_root() {
  local root="$1" pids
  pids="$(root_pids "$root")"
  if [ -n "$pids" ]; then
    say "stopping $(wc -w <<<"$pids") processes inside $root (Slurm $(release_of_root "$root"))"
    # shellcheck disable=SC2086 # one pid per word
    kill $pids 2>/dev/null || true
    for _ in $(seq 50); do
      pids="$(root_pids "$root")"
      [ -n "$pids" ] || break
      sleep 0.1
    done
    if [ -n "$pids" ]; then
      # shellcheck disable=SC2086
      kill -9 $pids 2>/dev/null || true
      sleep 0.2
    fi
  fi
  [ -z "$(root_pids "$root")" ] || fail "processes still running inside $root: $(root_pids "$root" | tr '\n' ' ')"
  umount_all "$root"
  [ -z "$(mounts_under "$root")" ] || fail "still mounted: $(mounts_under "$root" | tr '\n' ' ')"
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
