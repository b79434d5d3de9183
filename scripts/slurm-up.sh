#!/usr/bin/env bash
# Starts a real local Slurm (slurmctld, several slurmd with fake typed GPUs,
# slurmrestd with JWT) inside a cached Debian tree: SLURM_RELEASE=24.11 (the
# default) in a trixie tree under .local/slurm/root, SLURM_RELEASE=26.05 in
# a sid tree under .local/slurm/root-26.05. Idempotent: builds only what is
# missing and starts only the daemons that are not running. One release
# runs at a time: while the other one runs it refuses (SLURM_SWITCH=1 stops
# the other one first). Settings: see scripts/slurm/common.sh.
# On success it writes .local/slurm/env (source it to reach this Slurm).
set -Eeuo pipefail
# shellcheck source=slurm/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/slurm/common.sh"

[ "$(id -u)" -eq 0 ] || exec sudo -E bash "${BASH_SOURCE[0]}" "$@"

mkdir -p "$SLURM_STATE"
# One start or stop at a time: concurrent test runs may all call this. The
# daemons are started with fd 9 closed so that they do not hold the lock.
exec 9>"$SLURM_STATE/lock"
flock 9

started_at=$SECONDS
# Bad settings stop here, before anything changes: a running stack and its
# env file stay as they are.
check_release
nodes_list >/dev/null || exit 1
shards_per_gpu "" >/dev/null || exit 1
check_shard_flags

# Another release's stack of this checkout uses the same ports and state
# files: refuse, since someone may be testing against it (stopping it
# would cancel their jobs), unless SLURM_SWITCH=1 asks to stop it. Mounts
# left without processes are just undone.
mapfile -t roots < <(all_roots)
for other in "${roots[@]}"; do
  [ "$other" != "$SLURM_ROOTFS" ] || continue
  if [ -n "$(root_pids "$other")" ]; then
    if [ "${SLURM_SWITCH:-}" != 1 ]; then
      fail "Slurm $(release_of_root "$other") of this checkout is running ($other); refusing to start $SLURM_RELEASE beside it (same ports, and someone may be using it). Stop it first with 'make slurm-down' (scripts/slurm-down.sh), or set SLURM_SWITCH=1 to stop it and start $SLURM_RELEASE."
    fi
    say "SLURM_SWITCH=1: stopping Slurm $(release_of_root "$other") to start $SLURM_RELEASE"
    rm -f "$SLURM_ENV_FILE" "$SLURM_STATE/running-config" "$SLURM_STATE/running-dbd-config"
    stop_root "$other"
  fi
  umount_all "$other"
done

# From here on a failure means the stack may not work: withdraw the env file,
# which promises a working stack to tests.
SLURM_WITHDRAW_ENV_ON_FAIL=1
on_error() {
  rm -f "$SLURM_ENV_FILE"
  printf '\nslurm: start FAILED (line %s); daemon logs follow\n' "$1" >&2
  show_logs
}
trap 'on_error $LINENO' ERR

# ---------------------------------------------------------------- the root
ensure_debootstrap() {
  command -v debootstrap >/dev/null && return
  say "installing debootstrap (apt-get)"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
}

build_root() {
  if [ -f "$SLURM_ROOTFS/.gavel-bootstrap-done" ]; then
    return
  fi
  local t0=$SECONDS
  ensure_debootstrap
  if [ -e "$SLURM_ROOTFS" ]; then
    say "removing an unfinished root"
    umount_all
    rm -rf --one-file-system "$SLURM_ROOTFS"
  fi
  say "debootstrap $SLURM_DEBIAN_SUITE (minbase) into $SLURM_ROOTFS from $SLURM_DEBIAN_MIRROR (up to a minute)"
  if ! debootstrap --variant=minbase "$SLURM_DEBIAN_SUITE" "$SLURM_ROOTFS" "$SLURM_DEBIAN_MIRROR" >"$SLURM_STATE/debootstrap-$SLURM_RELEASE.log" 2>&1; then
    tail -n 30 "$SLURM_STATE/debootstrap-$SLURM_RELEASE.log" >&2
    umount_all
    fail "debootstrap failed; full log in $SLURM_STATE/debootstrap-$SLURM_RELEASE.log"
  fi
  # A new root numbers its jobs from 1 again: files that earlier jobs left
  # in its shared folder (named after their job ids) would mislead new
  # jobs with the same ids.
  if [ -d "$SLURM_HOST_SHARED" ] && [ -n "$(ls -A "$SLURM_HOST_SHARED")" ]; then
    say "emptying $SLURM_HOST_SHARED (files of the jobs of an earlier root)"
    find "$SLURM_HOST_SHARED" -mindepth 1 -delete
  fi
  # Package scripts must not start services: we start the daemons ourselves.
  printf '#!/bin/sh\nexit 101\n' >"$SLURM_ROOTFS/usr/sbin/policy-rc.d"
  chmod 755 "$SLURM_ROOTFS/usr/sbin/policy-rc.d"
  touch "$SLURM_ROOTFS/.gavel-bootstrap-done"
  root_build_s=$((root_build_s + SECONDS - t0))
}

mount_root() {
  mkdir -p "$SLURM_HOST_SHARED" "$SLURM_ROOTFS$SLURM_JOB_SHARED"
  chmod 1777 "$SLURM_HOST_SHARED"
  mountpoint -q "$SLURM_ROOTFS/proc" || mount -t proc proc "$SLURM_ROOTFS/proc"
  mountpoint -q "$SLURM_ROOTFS/sys" || mount -t sysfs -o ro sysfs "$SLURM_ROOTFS/sys"
  mountpoint -q "$SLURM_ROOTFS/dev" || mount --bind /dev "$SLURM_ROOTFS/dev"
  mountpoint -q "$SLURM_ROOTFS/dev/pts" || mount --bind /dev/pts "$SLURM_ROOTFS/dev/pts"
  mountpoint -q "$SLURM_ROOTFS$SLURM_JOB_SHARED" ||
    mount --bind "$SLURM_HOST_SHARED" "$SLURM_ROOTFS$SLURM_JOB_SHARED"
}

install_packages() {
  local marker="$SLURM_ROOTFS/.gavel-packages"
  if [ -f "$marker" ] && [ "$(cat "$marker")" = "$SLURM_PACKAGES" ]; then
    return
  fi
  local t0=$SECONDS log="$SLURM_STATE/apt-$SLURM_RELEASE.log"
  say "installing $SLURM_PACKAGES inside the root (about 30 s)"
  cp /etc/resolv.conf "$SLURM_ROOTFS/etc/resolv.conf" 2>/dev/null || true
  # shellcheck disable=SC2086 # the package list and options are split on purpose
  if ! in_root env DEBIAN_FRONTEND=noninteractive sh -c \
    "apt-get $SLURM_APT_OPTIONS update -qq && apt-get $SLURM_APT_OPTIONS install -y -qq --no-install-recommends $SLURM_PACKAGES" \
    >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    fail "apt-get inside the root failed; full log in $log"
  fi
  in_root apt-get clean
  printf '%s' "$SLURM_PACKAGES" >"$marker"
  root_build_s=$((root_build_s + SECONDS - t0))
}

# slurm_version prints the installed Slurm's version (26.05.5), without
# Debian's epoch and revision.
slurm_version() {
  local v
  v="$(in_root dpkg-query -W -f='${Version}' slurmctld 2>/dev/null)" || return 1
  v="${v#*:}"
  printf '%s' "${v%%-*}"
}

# check_version: the suite must still ship the release asked for (sid moves
# on): a root holding another release fails here, before anything starts.
check_version() {
  local v
  v="$(slurm_version)" || fail "slurmctld is not installed in $SLURM_ROOTFS"
  case "$v" in
  "$SLURM_RELEASE".*) ;;
  *) fail "$SLURM_ROOTFS holds Slurm $v, not $SLURM_RELEASE (Debian $SLURM_DEBIAN_SUITE ships another release now?)" ;;
  esac
}

# ---------------------------------------------------------------- config
configure_root() {
  local r="$SLURM_ROOTFS" host
  host="$(hostname -s)"
  grep -qw "$host" "$r/etc/hosts" 2>/dev/null || printf '127.0.0.1 localhost %s\n' "$host" >>"$r/etc/hosts"
  in_root id -u slurmrestd >/dev/null 2>&1 || in_root useradd --system --no-create-home --shell /usr/sbin/nologin slurmrestd
  # Users of the account tree (scripts/slurm/accounts.sh): two users of
  # different accounts, and an operator for the daemon to run as.
  local user uid
  for user in alice:5001 bob:5002 gavel-op:5003; do
    uid=${user#*:} user=${user%%:*}
    in_root id -u "$user" >/dev/null 2>&1 ||
      in_root useradd --uid "$uid" --user-group --no-create-home --shell /bin/sh "$user"
  done

  mkdir -p "$r/run/slurm" "$r/run/munge" "$r/var/log/munge" "$r/var/spool/slurmctld" "$r/var/spool/slurmd" \
    "$r$SLURM_LOG_IN_ROOT" "$r/var/lib/gavel-gpus" "$r/etc/slurm"
  in_root chown slurm:slurm /var/spool/slurmctld /var/log/slurm /run/slurm
  in_root chown munge:munge /run/munge /var/log/munge
  # log/ follows the release that runs.
  ln -sfn "${SLURM_ROOTFS##*/}$SLURM_LOG_IN_ROOT" "$SLURM_LOG"

  if [ ! -s "$r/etc/munge/munge.key" ]; then
    in_root mungekey --create --keyfile=/etc/munge/munge.key
  fi
  in_root chown munge:munge /etc/munge/munge.key
  chmod 0400 "$r/etc/munge/munge.key"

  if [ ! -s "$r/etc/slurm/jwt.key" ]; then
    head -c 32 /dev/urandom >"$r/etc/slurm/jwt.key"
  fi
  in_root chown slurm:slurm /etc/slurm/jwt.key
  chmod 0600 "$r/etc/slurm/jwt.key"

  # Fake GPUs: character devices with /dev/null's numbers, one per GPU.
  # Each node's features: its GPU type (the daemon's constraint) and, on
  # the first node of each type, "ib", a feature of the users' own that
  # the daemon must keep when it adds the type.
  local name type gpus port nodes="" gres="AutoDetect=off"$'\n' i features gpu_nodes="" gres_types=gpu gpu_type_list=""
  while read -r name type gpus port; do
    for ((i = 0; i < gpus; i++)); do
      [ -c "$r/var/lib/gavel-gpus/$name-gpu$i" ] || mknod "$r/var/lib/gavel-gpus/$name-gpu$i" c 1 3
    done
    if [ "$type" = mixed ]; then
      # One GRES entry and one gres.conf line per type, devices numbered
      # on from the previous type's.
      local g t n first=0 list=""
      features=""
      for g in $SLURM_MIXED_GRES; do
        t=${g%%:*} n=${g##*:}
        list+="${list:+,}gpu:$t:$n" features+="${features:+,}$t"
        gres+="NodeName=$name Name=gpu Type=$t File=/var/lib/gavel-gpus/$name-gpu[$first-$((first + n - 1))]"$'\n'
        first=$((first + n))
      done
      nodes+="NodeName=$name NodeAddr=127.0.0.1 NodeHostname=$host Port=$port CPUs=$SLURM_CPUS_PER_NODE RealMemory=16000 Gres=$list Feature=$features State=UNKNOWN"$'\n'
      continue
    fi
    features=$type
    [[ " $gpu_type_list " == *" $type "* ]] || gpu_type_list+=" $type"
    [[ $name == *-1 ]] && features+=",ib"
    gpu_nodes+="${gpu_nodes:+,}$name"
    local node_gres="gpu:$type:$gpus" shards shard_flags=""
    gres+="NodeName=$name Name=gpu Type=$type File=/var/lib/gavel-gpus/$name-gpu[0-$((gpus - 1))]"$'\n'
    shards="$(shards_per_gpu "$type")"
    if [ "$shards" -gt 0 ]; then
      # GPU sharing (SLURM_GPU_SHARDS): the node's GPUs also count as
      # shards, on the same device files, so that Slurm knows which GPU
      # each shard lives on and never gives one GPU whole and in shards
      # at once. With one_sharing, shards come from one GPU of the node at
      # a time: two shard jobs on a node always share a GPU. Slurm keeps
      # the flag per GRES, not per node: a shard line without it turned
      # it off for every node, so every line gets the same flags.
      [ "$SLURM_SHARD_FLAGS" = none ] || shard_flags=" Flags=$SLURM_SHARD_FLAGS"
      node_gres+=",shard:$((shards * gpus))"
      gres+="NodeName=$name Name=shard Count=$((shards * gpus)) File=/var/lib/gavel-gpus/$name-gpu[0-$((gpus - 1))]$shard_flags"$'\n'
      gres_types="gpu,shard"
    fi
    nodes+="NodeName=$name NodeAddr=127.0.0.1 NodeHostname=$host Port=$port CPUs=$SLURM_CPUS_PER_NODE RealMemory=16000 Gres=$node_gres Feature=$features State=UNKNOWN"$'\n'
  done < <(all_nodes_list)
  [ -n "$nodes" ] || fail "SLURM_GPU_NODES defines no nodes"

  # Accounting: slurmdbd, GPUs (and shards) as tracked resources so that
  # QOS and association limits can name them, and limits enforced.
  local accounting="AccountingStorageType=accounting_storage/none" fairshare=0
  if [ "$SLURM_ACCOUNTING" = 1 ]; then
    # The typed GPUs too, so that a finished job's record says which type
    # it ran on (gavel-slurm whatif reads it back), and comments, where
    # the jobs' gavel: tags live.
    local tres=gres/gpu t
    for t in $gpu_type_list $SLURM_MIXED_GRES; do
      t=${t%%:*}
      [[ ",$tres," == *",gres/gpu:$t,"* ]] || tres+=",gres/gpu:$t"
    done
    [ "$gres_types" = gpu ] || tres+=",gres/shard"
    accounting="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$SLURMDBD_PORT
AccountingStorageTRES=$tres
AccountingStorageEnforce=associations,limits,qos
AccountingStoreFlags=job_comment
# Jobs leave the controller after MinJobAge: sacct keeps their records.
JobCompType=jobcomp/none"
    fairshare=10000
    configure_slurmdbd
  fi

  local conf
  conf="$(sed -e "s|@HOST@|$host|g" -e "s|@SLURMCTLD_PORT@|$SLURMCTLD_PORT|g" \
    -e "s|@LOG@|$SLURM_LOG_IN_ROOT|g" -e "s|@GPU_NODES@|$gpu_nodes|g" \
    -e "s|@MIXED_NODE@|$SLURM_MIXED_NODE|g" -e "s|@MIXED_PARTITION@|$SLURM_MIXED_PARTITION|g" \
    -e "s|@GRES_TYPES@|$gres_types|g" -e "s|@FAIRSHARE_WEIGHT@|$fairshare|g" \
    "$SLURM_TEMPLATES/slurm.conf.in")"
  conf="${conf/@NODES@/$nodes}"
  conf="${conf/@ACCOUNTING@/$accounting}"
  printf '%s\n' "$conf" >"$r/etc/slurm/slurm.conf"
  printf '# Generated by scripts/slurm-up.sh; edits here are lost.\n%s' "$gres" >"$r/etc/slurm/gres.conf"
  cp "$SLURM_TEMPLATES/cgroup.conf" "$r/etc/slurm/cgroup.conf"
  chmod 0644 "$r/etc/slurm/slurm.conf" "$r/etc/slurm/gres.conf" "$r/etc/slurm/cgroup.conf"
}

# configure_slurmdbd writes slurmdbd.conf (its database password made once
# and kept in the file) and readies MariaDB's folders.
configure_slurmdbd() {
  local r="$SLURM_ROOTFS" pass=""
  [ -f "$r/etc/slurm/slurmdbd.conf" ] && pass="$(sed -n 's/^StoragePass=//p' "$r/etc/slurm/slurmdbd.conf")"
  [ -n "$pass" ] || pass="$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')"
  sed -e "s|@SLURMDBD_PORT@|$SLURMDBD_PORT|g" -e "s|@LOG@|$SLURM_LOG_IN_ROOT|g" -e "s|@STORAGE_PASS@|$pass|g" \
    "$SLURM_TEMPLATES/slurmdbd.conf.in" >"$r/etc/slurm/slurmdbd.conf.tmp"
  chmod 0600 "$r/etc/slurm/slurmdbd.conf.tmp"
  in_root chown slurm:slurm /etc/slurm/slurmdbd.conf.tmp
  mv -f "$r/etc/slurm/slurmdbd.conf.tmp" "$r/etc/slurm/slurmdbd.conf"
  # MariaDB listens on /run/mysqld/mysqld.sock; the client library of
  # Debian sid looks in /run/mariadbd first: both paths lead there.
  mkdir -p "$r/run/mysqld" "$r/run/mariadbd"
  in_root chown mysql:mysql /run/mysqld /run/mariadbd
  ln -sfn /run/mysqld/mysqld.sock "$r/run/mariadbd/mysqld.sock"
}

# The collector's Prolog, Epilog and TaskProlog from contrib/slurm, as a
# site installs them, behind one wrapper each that points them at the
# node's own folders: /shared/gavel/<node>/jobs and .../progress (on the
# host: $SLURM_HOST_SHARED/gavel/<node>/...), where the tests' and the
# demo's collectors read them.
install_collector_scripts() {
  local r="$SLURM_ROOTFS" libexec=/usr/local/libexec/gavel-slurm part
  mkdir -p "$r$libexec" "$SLURM_HOST_SHARED/gavel"
  chmod 0755 "$SLURM_HOST_SHARED/gavel"
  for part in prolog epilog taskprolog; do
    install -m 0755 "$SLURM_REPO_ROOT/contrib/slurm/gavel-$part.sh" "$r$libexec/gavel-$part.sh"
    cat >"$r/etc/slurm/gavel-node-$part.tmp" <<EOF
#!/bin/sh
# Generated by scripts/slurm-up.sh: every slurmd of the local Slurm shares
# one host, so each node keeps the collector's files in its own folder.
node=\${SLURMD_NODENAME:-unknown}
GAVEL_JOBS_DIR=$SLURM_JOB_SHARED/gavel/\$node/jobs
GAVEL_PROGRESS_DIR=$SLURM_JOB_SHARED/gavel/\$node/progress
export GAVEL_JOBS_DIR GAVEL_PROGRESS_DIR
exec $libexec/gavel-$part.sh
EOF
    chmod 0755 "$r/etc/slurm/gavel-node-$part.tmp"
    mv -f "$r/etc/slurm/gavel-node-$part.tmp" "$r/etc/slurm/gavel-node-$part"
  done
}

config_hash() {
  cat "$SLURM_ROOTFS/etc/slurm/slurm.conf" "$SLURM_ROOTFS/etc/slurm/gres.conf" \
    "$SLURM_ROOTFS/etc/slurm/cgroup.conf" | sha256sum | cut -d' ' -f1
}

# dbd_hash: slurmdbd's own configuration, which restarts slurmdbd alone.
dbd_hash() {
  [ "$SLURM_ACCOUNTING" = 1 ] || return 0
  sha256sum <"$SLURM_ROOTFS/etc/slurm/slurmdbd.conf" | cut -d' ' -f1
}

# ---------------------------------------------------------------- daemons
pidfile() { printf '%s/run/%s' "$SLURM_ROOTFS" "$1"; }

stop_pidfile() {
  local pf="$1" name="$2" pid i
  pid_alive "$pf" "$name" || return 0
  pid="$(tr -dc 0-9 <"$pf")"
  kill "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    [ -d "/proc/$pid" ] || return 0
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
}

stop_slurm_daemons() {
  local name type gpus port
  stop_pidfile "$(pidfile slurm/slurmrestd.pid)" slurmrestd
  while read -r name type gpus port; do
    stop_pidfile "$(pidfile "slurm/slurmd-$name.pid")" slurmd
  done < <(all_nodes_list)
  stop_pidfile "$(pidfile slurm/slurmctld.pid)" slurmctld
  # Accounting on or off, port or password changed: slurmdbd goes too,
  # and starts again with its new configuration (MariaDB stays).
  stop_pidfile "$(pidfile slurm/slurmdbd.pid)" slurmdbd
}

# start_mariadb: MariaDB inside the root, on its socket only (no port to
# clash with anything on the host). Debian's package made its data folder.
start_mariadb() {
  pid_alive "$(pidfile mysqld/mysqld.pid)" mariadbd && return
  local r="$SLURM_ROOTFS"
  if [ ! -d "$r/var/lib/mysql/mysql" ]; then
    say "creating MariaDB's data folder"
    in_root mariadb-install-db --user=mysql --datadir=/var/lib/mysql >>"$SLURM_LOG/mariadb.stderr.log" 2>&1 ||
      fail_with_logs "mariadb-install-db failed"
  fi
  say "starting MariaDB"
  setsid env -i PATH=/usr/sbin:/usr/bin chroot "$r" /usr/sbin/mariadbd --user=mysql \
    --datadir=/var/lib/mysql --socket=/run/mysqld/mysqld.sock --pid-file=/run/mysqld/mysqld.pid \
    --skip-networking --innodb-buffer-pool-size=128M --innodb-lock-wait-timeout=900 --innodb-snapshot-isolation=OFF \
    </dev/null >>"$SLURM_LOG/mariadb.stderr.log" 2>&1 9>&- &
}

mariadb_up() { in_root mariadb -e 'select 1'; }

# grant_slurm_db: the database user slurmdbd logs in as, with the password
# of slurmdbd.conf (set again each start, in case the file was remade).
grant_slurm_db() {
  local pass
  pass="$(sed -n 's/^StoragePass=//p' "$SLURM_ROOTFS/etc/slurm/slurmdbd.conf")"
  in_root mariadb -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$pass';
ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$pass';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';" || fail_with_logs "cannot create MariaDB's slurm user"
}

# MariaDB's client library 3.4.10 (Debian trixie and sid, MariaDB 11.8.9)
# refuses the one-column answer to slurmdbd's first query ("Number of
# columns in result (=1) set execeeds maxmimum allowed number of columns
# (=0)"), and slurmdbd 24.11.5 and 26.05.5 exit at once. The client library
# of bookworm (3.3) has no such check, and speaks to MariaDB 11.8 as well:
# slurmdbd alone loads it, from a folder of its own, so that the root's
# packages stay as Debian made them. It is fetched once, with the root's
# own apt and keyring, and kept with the root.
OLD_MARIADB_LIB=/opt/gavel-libmariadb
ensure_slurmdbd_client_library() {
  local r="$SLURM_ROOTFS" lib=/usr/lib/x86_64-linux-gnu/libmariadb.so.3
  if ! grep -qa 'maxmimum allowed number of columns' "$r$lib" 2>/dev/null; then
    rm -rf "$r$OLD_MARIADB_LIB"
    return
  fi
  [ -f "$r$OLD_MARIADB_LIB/libmariadb.so.3" ] && return
  say "fetching bookworm's MariaDB client library for slurmdbd (its own breaks slurmdbd)"
  local t0=$SECONDS apt_dir=/var/lib/gavel-bookworm-apt log="$SLURM_STATE/apt-libmariadb-$SLURM_RELEASE.log"
  mkdir -p "$r$apt_dir/lists/partial" "$r$apt_dir/cache/archives/partial" "$r$OLD_MARIADB_LIB"
  printf 'deb %s bookworm main\n' "$SLURM_DEBIAN_MIRROR" >"$r$apt_dir/sources.list"
  : >"$r$apt_dir/status"
  local opts="-o Dir::Etc::SourceList=$apt_dir/sources.list -o Dir::Etc::SourceParts=/dev/null"
  opts+=" -o Dir::State::Lists=$apt_dir/lists -o Dir::Cache=$apt_dir/cache -o Dir::State::Status=$apt_dir/status"
  if ! in_root sh -c "cd $apt_dir && rm -f libmariadb3_*.deb && apt-get $opts update -qq && apt-get $opts download libmariadb3 &&
    dpkg-deb -x libmariadb3_*.deb x && cp x/usr/lib/x86_64-linux-gnu/libmariadb.so.3 $OLD_MARIADB_LIB/ && rm -rf x" >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    fail "cannot fetch bookworm's libmariadb3 for slurmdbd; log in $log"
  fi
  root_build_s=$((root_build_s + SECONDS - t0))
}

start_slurmdbd() {
  pid_alive "$(pidfile slurm/slurmdbd.pid)" slurmdbd && return
  say "starting slurmdbd (port $SLURMDBD_PORT)"
  local preload=()
  [ ! -f "$SLURM_ROOTFS$OLD_MARIADB_LIB/libmariadb.so.3" ] || preload=(env LD_LIBRARY_PATH="$OLD_MARIADB_LIB")
  in_root "${preload[@]}" /usr/sbin/slurmdbd </dev/null >>"$SLURM_LOG/slurmdbd.stderr.log" 2>&1 9>&- ||
    fail_with_logs "slurmdbd did not start"
}

dbd_up() { in_root sacctmgr -n show cluster format=cluster; }

start_munge() {
  pid_alive "$(pidfile munge/munged.pid)" munged && return
  say "starting munged"
  local uid gid
  uid="$(in_root id -u munge)" gid="$(in_root id -g munge)"
  env -i PATH=/usr/sbin:/usr/bin chroot --userspec="$uid:$gid" "$SLURM_ROOTFS" \
    /usr/sbin/munged --pid-file=/run/munge/munged.pid --log-file=/var/log/munge/munged.log \
    </dev/null >>"$SLURM_LOG/munged.stderr.log" 2>&1 9>&- || fail_with_logs "munged did not start"
}

start_slurmctld() {
  pid_alive "$(pidfile slurm/slurmctld.pid)" slurmctld && return
  say "starting slurmctld (port $SLURMCTLD_PORT)"
  in_root /usr/sbin/slurmctld </dev/null >>"$SLURM_LOG/slurmctld.stderr.log" 2>&1 9>&- ||
    fail_with_logs "slurmctld did not start"
}

start_slurmds() {
  local name type gpus port started=""
  while read -r name type gpus port; do
    pid_alive "$(pidfile "slurm/slurmd-$name.pid")" slurmd && continue
    mkdir -p "$SLURM_ROOTFS/var/spool/slurmd/$name"
    in_root /usr/sbin/slurmd -N "$name" </dev/null >>"$SLURM_LOG/slurmd-$name.stderr.log" 2>&1 9>&- ||
      fail_with_logs "slurmd $name did not start"
    started+=" $name"
  done < <(all_nodes_list)
  [ -z "$started" ] || say "started slurmd for:$started"
}

start_slurmrestd() {
  local pf
  pf="$(pidfile slurm/slurmrestd.pid)"
  pid_alive "$pf" slurmrestd && return
  say "starting slurmrestd on 127.0.0.1:$SLURMRESTD_PORT"
  local uid gid
  uid="$(in_root id -u slurmrestd)" gid="$(in_root id -g slurmrestd)"
  # slurmrestd refuses root and SlurmUser, and needs SLURM_JWT=daemon to
  # accept tokens. It does not daemonize: setsid detaches it from this shell.
  # openapi/slurmdbd (the /slurmdb/ endpoints) only works with slurmdbd.
  local plugins=openapi/slurmctld
  [ "$SLURM_ACCOUNTING" = 0 ] || plugins+=",openapi/slurmdbd"
  setsid env -i PATH=/usr/sbin:/usr/bin SLURM_JWT=daemon SLURM_CONF=/etc/slurm/slurm.conf \
    chroot --userspec="$uid:$gid" "$SLURM_ROOTFS" \
    /usr/sbin/slurmrestd -s "$plugins" "127.0.0.1:$SLURMRESTD_PORT" \
    </dev/null >>"$SLURM_LOG/slurmrestd.log" 2>&1 9>&- &
  echo $! >"$pf"
}

# ---------------------------------------------------------------- checks
wait_for() { # wait_for SECONDS DESCRIPTION COMMAND...
  local limit="$1" what="$2" deadline
  shift 2
  deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || {
      show_logs
      fail "timed out after ${limit}s waiting for $what"
    }
    sleep 0.3
  done
}

ctld_up() { in_root scontrol ping | grep -q 'is UP'; }

nodes_ready() {
  local states
  states="$(in_root sinfo -h -N -p gpu -o '%t')" || return 1
  [ -n "$states" ] || return 1
  # Every node idle, allocated or mixed; anything else (down, inval, unk) waits.
  ! grep -qvE '^(idle|alloc|mix|comp)$' <<<"$states"
}

rest_up() {
  curl -fsS -m 5 -H "X-SLURM-USER-NAME: $SLURM_TOKEN_USER" -H "X-SLURM-USER-TOKEN: $(cat "$SLURM_STATE/token")" \
    "http://127.0.0.1:$SLURMRESTD_PORT/slurm/v0.0.42/ping"
}

# api_versions prints the REST API versions slurmrestd serves
# ("v0.0.42 v0.0.43 ..."), read from the paths of its OpenAPI description
# (written "\/slurm\/v0.0.43\/..." by 26.05).
api_versions() {
  curl -fsS -m 20 -H "X-SLURM-USER-NAME: $SLURM_TOKEN_USER" -H "X-SLURM-USER-TOKEN: $(cat "$SLURM_STATE/token")" \
    "http://127.0.0.1:$SLURMRESTD_PORT/openapi/v3" |
    grep -oE '"\\?/slurm\\?/v[0-9]+\.[0-9]+\.[0-9]+' | grep -oE 'v[0-9]+\.[0-9]+\.[0-9]+$' |
    sort -u -V | paste -sd' ' -
}

mint_token() {
  local out
  out="$(in_root scontrol token username="$SLURM_TOKEN_USER" lifespan="$SLURM_TOKEN_LIFESPAN")" ||
    fail "scontrol token failed: $out"
  out="${out#SLURM_JWT=}"
  (umask 077 && printf '%s' "$out" >"$SLURM_STATE/token")
}

write_wrappers() {
  mkdir -p "$SLURM_BIN"
  local cmd
  {
    printf '#!/usr/bin/env bash\n'
    printf '# Runs a Slurm command inside the local Slurm root (generated by scripts/slurm-up.sh).\n'
    printf '# The working directory maps to the job view when it lies in the shared folder.\n'
    printf 'set -euo pipefail\n'
    printf 'root=%q\nhost_shared=%q\njob_shared=%q\n' "$SLURM_ROOTFS" "$SLURM_HOST_SHARED" "$SLURM_JOB_SHARED"
    cat <<'EOF'
[ "$(id -u)" -eq 0 ] || exec sudo -n "$0" "$@"
dir="$job_shared"
case "$PWD/" in "$host_shared"/*) dir="$job_shared${PWD#"$host_shared"}" ;; esac
exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 SLURM_CONF=/etc/slurm/slurm.conf \
  chroot "$root" /bin/sh -c 'cd "$1" && shift && exec "$@"' sh "$dir" "$@"
EOF
  } >"$SLURM_BIN/in-slurm-root"
  chmod 755 "$SLURM_BIN/in-slurm-root"
  for cmd in sbatch srun scontrol squeue sinfo scancel sprio sacct sacctmgr sshare; do
    printf '#!/bin/sh\nexec %q %s "$@"\n' "$SLURM_BIN/in-slurm-root" "$cmd" >"$SLURM_BIN/$cmd"
    chmod 755 "$SLURM_BIN/$cmd"
  done
}

write_env() {
  local tmp="$SLURM_ENV_FILE.tmp"
  {
    printf '# Local Slurm for gavel-slurm tests (written by scripts/slurm-up.sh).\n'
    printf 'SLURMRESTD_URL=%q\n' "http://127.0.0.1:$SLURMRESTD_PORT"
    printf 'SLURM_JWT_FILE=%q\n' "$SLURM_STATE/token"
    printf 'SLURM_USER_NAME=%q\n' "$SLURM_TOKEN_USER"
    # The release, and the API versions its slurmrestd serves, oldest
    # first: tests tell from these which Slurm they face. SLURM_API_VERSION
    # is one that every release here serves.
    printf 'SLURM_RELEASE=%q\n' "$SLURM_RELEASE"
    printf 'SLURM_VERSION=%q\n' "$(slurm_version)"
    printf 'SLURM_API_VERSIONS=%q\n' "$served_versions"
    printf 'SLURM_API_VERSION=v0.0.42\n'
    printf 'SLURM_PARTITION=gpu\n'
    printf 'SLURM_GPU_NODES=%q\n' "$SLURM_GPU_NODES"
    printf 'SLURM_GPU_SHARDS=%q\nSLURM_SHARD_FLAGS=%q\n' "$SLURM_GPU_SHARDS" "$SLURM_SHARD_FLAGS"
    printf 'SLURM_MIXED_NODE=%q\nSLURM_MIXED_PARTITION=%q\n' "$SLURM_MIXED_NODE" "$SLURM_MIXED_PARTITION"
    printf 'SBATCH=%q\nSRUN=%q\nSCONTROL=%q\nSQUEUE=%q\nSINFO=%q\nSCANCEL=%q\n' \
      "$SLURM_BIN/sbatch" "$SLURM_BIN/srun" "$SLURM_BIN/scontrol" "$SLURM_BIN/squeue" \
      "$SLURM_BIN/sinfo" "$SLURM_BIN/scancel"
    # With accounting: slurmdbd answers sacct, sacctmgr and slurmrestd's
    # /slurmdb/ endpoints; the account tree is scripts/slurm/accounts.sh's.
    printf 'SLURM_ACCOUNTING=%q\n' "$SLURM_ACCOUNTING"
    printf 'SACCT=%q\nSACCTMGR=%q\nSSHARE=%q\n' "$SLURM_BIN/sacct" "$SLURM_BIN/sacctmgr" "$SLURM_BIN/sshare"
    printf 'SLURM_SHARED_DIR=%q\n' "$SLURM_HOST_SHARED"
    printf 'SLURM_SHARED_DIR_IN_JOB=%q\n' "$SLURM_JOB_SHARED"
    printf 'SLURM_LOG_DIR=%q\n' "$SLURM_LOG"
    # The collector's folders of node N: $SLURM_COLLECTOR_DIR/N/jobs and
    # $SLURM_COLLECTOR_DIR/N/progress (written by the Prolog).
    printf 'SLURM_COLLECTOR_DIR=%q\n' "$SLURM_HOST_SHARED/gavel"
  } >"$tmp"
  mv "$tmp" "$SLURM_ENV_FILE"
}

# ---------------------------------------------------------------- main
root_build_s=0
accounting_s=0
build_root
mount_root
install_packages
check_version
configure_root
install_collector_scripts

hash="$(config_hash)"
if [ -f "$SLURM_STATE/running-config" ] && [ "$(cat "$SLURM_STATE/running-config")" != "$hash" ]; then
  say "configuration changed: restarting the Slurm daemons"
  rm -f "$SLURM_ENV_FILE"
  stop_slurm_daemons
fi
printf '%s\n' "$hash" >"$SLURM_STATE/running-config"

start_munge
wait_for 10 "munged" test -S "$SLURM_ROOTFS/run/munge/munge.socket.2"
if [ "$SLURM_ACCOUNTING" = 1 ]; then
  dbd="$(dbd_hash)"
  if [ -f "$SLURM_STATE/running-dbd-config" ] && [ "$(cat "$SLURM_STATE/running-dbd-config")" != "$dbd" ]; then
    stop_pidfile "$(pidfile slurm/slurmdbd.pid)" slurmdbd
  fi
  ensure_slurmdbd_client_library
  t0=$SECONDS
  start_mariadb
  wait_for 60 "MariaDB to answer" mariadb_up
  grant_slurm_db
  start_slurmdbd
  printf '%s\n' "$dbd" >"$SLURM_STATE/running-dbd-config"
  wait_for 60 "slurmdbd to answer" dbd_up
  # shellcheck source=slurm/accounts.sh
  source "$SLURM_TEMPLATES/accounts.sh"
  add_cluster
  accounting_s=$((SECONDS - t0))
fi
start_slurmctld
wait_for 30 "slurmctld to answer" ctld_up
if [ "$SLURM_ACCOUNTING" = 1 ]; then
  # slurmdbd sends slurmctld every change of the tree as it is made.
  t0=$SECONDS
  apply_accounts
  accounting_s=$((accounting_s + SECONDS - t0))
fi
start_slurmds
wait_for 60 "every node to be idle" nodes_ready
mint_token
start_slurmrestd
wait_for 20 "slurmrestd to answer with the token" rest_up
served_versions="$(api_versions)" || fail "cannot read the API versions from slurmrestd's /openapi/v3"
[[ " $served_versions " == *" v0.0.42 "* ]] || fail "slurmrestd does not serve v0.0.42 (it serves: ${served_versions:-nothing})"
write_wrappers
write_env

# How long the parts took, for scripts/integration-test.sh.
total_s=$((SECONDS - started_at))
printf 'SLURM_RELEASE=%s\nROOT_BUILD_S=%s\nACCOUNTING_S=%s\nTOTAL_S=%s\n' "$SLURM_RELEASE" "$root_build_s" "$accounting_s" "$total_s" >"$SLURM_STATE/last-up"
if [ "$root_build_s" -gt 0 ]; then
  say "root for $SLURM_RELEASE built in ${root_build_s}s (debootstrap $SLURM_DEBIAN_SUITE and apt-get)"
fi
say "Slurm $(slurm_version) up in ${total_s}s: $(in_root sinfo -h -N -p gpu -o '%N' | wc -l) nodes, REST http://127.0.0.1:$SLURMRESTD_PORT (API $served_versions), env in $SLURM_ENV_FILE"
