#!/usr/bin/env bash
# Installs the Debian packages gavel-slurm needs to build: the COIN-OR CLP
# LP solver (linked through cgo) and pkg-config to find it; and, for the
# tests of contrib/slurm/job_submit.lua, Lua 5.1 (the version Debian's
# Slurm runs it with). Idempotent: does nothing when all are there.
set -euo pipefail

need=()
pkg-config --exists clp 2>/dev/null || need+=(coinor-libclp-dev)
command -v pkg-config >/dev/null || need+=(pkg-config)
command -v gcc >/dev/null || need+=(gcc)
command -v lua5.1 >/dev/null || need+=(lua5.1)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "deps: installing ${need[*]} (apt-get)"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" pkg-config >/dev/null
pkg-config --exists clp || { echo "deps: CLP still not found by pkg-config" >&2; exit 1; }
echo "deps: ok (CLP $(pkg-config --modversion clp))"
