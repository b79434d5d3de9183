# The local Slurm's account tree, put into slurmdbd by slurm-up.sh before
# slurmctld starts (sourced, not run; needs in_root from common.sh).
# Idempotent: what exists is set again to what this file says, so a test
# that changed a limit and died leaves nothing behind at the next start.
#
#   root (the cluster's root account)
#   ├── physics   Fairshare=3   alice
#   └── biology   Fairshare=1   bob, nobody
#   root, slurm and gavel-op (an Operator, for the daemon) in root.
#
# QOS gpu4 caps each user at 4 GPUs (MaxTRESPerUser=gres/gpu=4); every
# user may ask for it with --qos=gpu4, and normal stays the default.

SLURM_CLUSTER=gavel

# sacctmgr_do runs sacctmgr without questions; "Nothing new added" and
# "Nothing modified" are not failures (the tree is already as wanted).
sacctmgr_do() {
  local out
  if out="$(in_root sacctmgr -i "$@" 2>&1)"; then
    return 0
  fi
  case "$out" in
  *"Nothing new added"* | *"Nothing modified"* | *"already exists"*) return 0 ;;
  esac
  printf '%s\n' "$out" >&2
  fail "sacctmgr $* failed"
}

has() { [ -n "$(in_root sacctmgr -nP "$@" 2>/dev/null)" ]; }

# add_cluster: before slurmctld first starts, so that it registers with
# slurmdbd at once.
# A new database gives the cluster a new id: the id slurmctld saved while
# it ran without accounting (or against an earlier database) would make it
# stop ("CLUSTER ID MISMATCH"), so it goes, and slurmctld takes the new one.
add_cluster() {
  has show cluster "$SLURM_CLUSTER" format=cluster && return
  sacctmgr_do add cluster "$SLURM_CLUSTER"
  rm -f "$SLURM_ROOTFS/var/spool/slurmctld/clustername"
}

# apply_accounts: once slurmctld has registered, since gres/gpu exists as a
# TRES only after slurmctld has reported its AccountingStorageTRES.
apply_accounts() {
  local i
  for ((i = 0; i < 100; i++)); do
    has show tres where type=gres name=gpu format=id && break
    sleep 0.2
  done
  has show qos gpu4 format=name || sacctmgr_do add qos gpu4
  sacctmgr_do modify qos gpu4 set MaxTRESPerUser=gres/gpu=4

  local account share
  for account in physics:3 biology:1; do
    share=${account#*:} account=${account%%:*}
    has show account "$account" format=account ||
      sacctmgr_do add account "$account" Cluster="$SLURM_CLUSTER" Parent=root Fairshare="$share"
    sacctmgr_do modify account "$account" where cluster="$SLURM_CLUSTER" set Fairshare="$share"
  done

  local entry user level
  for entry in root:root slurm:root gavel-op:root alice:physics bob:biology nobody:biology; do
    user=${entry%%:*} account=${entry#*:}
    has show assoc where cluster="$SLURM_CLUSTER" user="$user" account="$account" format=user ||
      sacctmgr_do add user "$user" Cluster="$SLURM_CLUSTER" Account="$account" DefaultAccount="$account"
    sacctmgr_do modify user "$user" where cluster="$SLURM_CLUSTER" set QOS=normal,gpu4 DefaultQOS=normal
    level=None
    [ "$user" != gavel-op ] || level=Operator
    [ "$user" != root ] || level=Administrator
    sacctmgr_do modify user "$user" set AdminLevel="$level"
  done
}
