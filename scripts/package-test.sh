#!/usr/bin/env bash
# Installs the .deb from `make package` into a fresh Debian root and checks
# it: files and their modes, the configuration kept across an upgrade and
# a removal, the system user, `systemd-analyze verify` and an offline
# `systemd-analyze security` of both units, and the binary running there
# (`version`, and the collector on fake GPUs). Also compares the .rpm's
# file list with the .deb's when rpm is installed.
#
#   make package-test              builds the packages, then runs this
#   bash scripts/package-test.sh   checks the packages already in bin/package
#
# Not part of `make test`: it needs root (debootstrap, chroot, mounts) and,
# the first time, the network and a couple of minutes to build the Debian
# root, which is then cached under .local/package-test/base. Later runs take
# about 15 seconds, each in a fresh copy of that root.
#
#   SKIP_PACKAGE_TEST=1    skip, saying so
#   PACKAGE_TEST_SUITE     Debian release of the root (default trixie)
#   PACKAGE_TEST_MIRROR    Debian mirror (default http://deb.debian.org/debian)
set -Eeuo pipefail
cd "$(dirname "$0")/.."

if [ "${SKIP_PACKAGE_TEST:-}" = 1 ]; then
	echo "package-test: SKIPPED because SKIP_PACKAGE_TEST=1 (the packages were not checked)"
	exit 0
fi
[ "$(id -u)" -eq 0 ] || exec sudo -E bash "$0" "$@"

suite=${PACKAGE_TEST_SUITE:-trixie}
mirror=${PACKAGE_TEST_MIRROR:-http://deb.debian.org/debian}
state="$PWD/.local/package-test"
base="$state/base-$suite"
run="$state/run"
started=$SECONDS

say() { printf 'package-test: %s\n' "$*"; }
die() {
	printf 'package-test: ERROR: %s\n' "$*" >&2
	exit 1
}

deb=$(find bin/package -maxdepth 1 -name 'gavel-slurm_*.deb' 2>/dev/null | head -n 1)
rpmfile=$(find bin/package -maxdepth 1 -name 'gavel-slurm-*.rpm' 2>/dev/null | head -n 1)
[ -n "$deb" ] || die "no bin/package/gavel-slurm_*.deb: run make package (or make package-test)"

mkdir -p "$state"
exec 9>"$state/lock"
flock 9

# ---------------------------------------------------------------- the root
# The cached base: a minimal Debian with systemd (for systemd-analyze and
# systemd-sysusers) and, downloaded but not installed, the packages the
# .deb depends on, so that later runs need no network.
build_base() {
	local depends
	depends=$(dpkg-deb -f "$deb" Depends | tr -d ' ' | tr ',' ' ' | sed 's/([^)]*)//g')
	if [ -f "$base/.gavel-base-done" ]; then
		[ "$(cat "$base/.gavel-base-done")" = "$depends" ] && return
		download_depends "$depends"
		printf '%s' "$depends" >"$base/.gavel-base-done"
		return
	fi
	command -v debootstrap >/dev/null || {
		say "installing debootstrap (apt-get)"
		DEBIAN_FRONTEND=noninteractive apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
	}
	rm -rf --one-file-system "$base"
	say "debootstrap $suite (minbase) into $base (a minute or two, once)"
	debootstrap --variant=minbase "$suite" "$base" "$mirror" >"$state/debootstrap.log" 2>&1 ||
		{
			tail -n 20 "$state/debootstrap.log" >&2
			die "debootstrap failed; log in $state/debootstrap.log"
		}
	# Package scripts must not start services in the root.
	printf '#!/bin/sh\nexit 101\n' >"$base/usr/sbin/policy-rc.d"
	chmod 755 "$base/usr/sbin/policy-rc.d"
	cp /etc/resolv.conf "$base/etc/resolv.conf" 2>/dev/null || true
	say "installing systemd in the root"
	chroot "$base" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive sh -c \
		"apt-get update -qq && apt-get install -y -qq --no-install-recommends systemd" >"$state/apt.log" 2>&1 || {
		tail -n 20 "$state/apt.log" >&2
		die "apt-get in the root failed; log in $state/apt.log"
	}
	download_depends "$depends"
	printf '%s' "$depends" >"$base/.gavel-base-done"
}

# download_depends fetches the packages the .deb depends on into the
# root's cache; the marker file records the list they were fetched for.
download_depends() {
	say "downloading $1 into the root's package cache"
	chroot "$base" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive sh -c \
		"apt-get update -qq && apt-get install -y -qq --download-only --no-install-recommends $1" >>"$state/apt.log" 2>&1 || {
		tail -n 20 "$state/apt.log" >&2
		die "apt-get in the root failed; log in $state/apt.log"
	}
}

umount_run() {
	local m
	for m in $(findmnt -rn -o TARGET | awk -v r="$run" 'index($0, r "/") == 1 || $0 == r' | sort -r); do
		umount "$m" 2>/dev/null || umount -l "$m"
	done
}

# fresh_root makes $run a copy of the base: an overlay where the kernel
# allows one (instant), else a copy.
fresh_root() {
	umount_run
	rm -rf --one-file-system "$run" "$state/upper" "$state/work"
	mkdir -p "$run" "$state/upper" "$state/work"
	if ! mount -t overlay overlay -o "lowerdir=$base,upperdir=$state/upper,workdir=$state/work" "$run" 2>/dev/null; then
		rmdir "$run"
		cp -a "$base" "$run"
	fi
	mount -t proc proc "$run/proc"
}

in_root() { chroot "$run" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }

# ---------------------------------------------------------------- checks
failures=0
ok() { printf '  ok    %s\n' "$*"; }
bad() {
	printf '  FAIL  %s\n' "$*"
	failures=$((failures + 1))
}
check() { # check DESCRIPTION COMMAND...
	local what="$1"
	shift
	if "$@" >"$state/check.out" 2>&1; then
		ok "$what"
	else
		bad "$what"
		sed 's/^/        /' "$state/check.out" | tail -n 15
	fi
}

mode_is() { [ "$(stat -c %a "$run$1")" = "$2" ] || { echo "$1 has mode $(stat -c %a "$run$1"), want $2"; return 1; }; }

files_present() {
	local f missing=0
	for f in /usr/bin/gavel-slurm /etc/gavel-slurm/gavel-slurm.toml /etc/gavel-slurm/collector.env \
		/usr/lib/systemd/system/gavel-slurm.service /usr/lib/systemd/system/gavel-slurm-collector.service \
		/usr/lib/sysusers.d/gavel-slurm.conf \
		/usr/share/gavel-slurm/gavel-simulation-throughputs.json \
		/usr/share/gavel-slurm/gavel-physical-cluster-throughputs.json \
		/usr/share/gavel-slurm/GAVEL-DATA-LICENSE.txt \
		/usr/share/gavel-slurm/contrib/slurm/job_submit.lua \
		/usr/share/gavel-slurm/contrib/grafana/gavel-slurm.json \
		/usr/share/doc/gavel-slurm/packaging.md; do
		[ -f "$run$f" ] || {
			echo "missing $f"
			missing=1
		}
	done
	# Every contrib file git tracks, tests left out.
	while read -r f; do
		case "$f" in *_test.go | */testdata/* | */test_*.py | */.gitignore) continue ;; esac
		[ -f "$run/usr/share/gavel-slurm/$f" ] || {
			echo "missing /usr/share/gavel-slurm/$f"
			missing=1
		}
	done < <(git ls-files contrib)
	return $missing
}

no_tests_shipped() {
	local found
	found=$(find "$run/usr/share/gavel-slurm/contrib" \( -name '*_test.go' -o -name testdata -o -name 'test_*.py' \) -printf '%P\n')
	[ -z "$found" ] || {
		echo "test files in the package: $found"
		return 1
	}
}

tables_match_source() {
	cmp etc/gavel-simulation-throughputs.json "$run/usr/share/gavel-slurm/gavel-simulation-throughputs.json" &&
		cmp etc/GAVEL-DATA-LICENSE.txt "$run/usr/share/gavel-slurm/GAVEL-DATA-LICENSE.txt" &&
		cmp etc/gavel-slurm.toml "$run/etc/gavel-slurm/gavel-slurm.toml"
}

conffiles() {
	local c
	c=$(in_root dpkg-query -W -f='${Conffiles}' gavel-slurm)
	echo "$c"
	grep -q ' /etc/gavel-slurm/gavel-slurm.toml ' <<<"$c " && grep -q ' /etc/gavel-slurm/collector.env ' <<<"$c "
}

system_user() {
	local line uid shell
	line=$(in_root getent passwd gavel-slurm) || {
		echo "no user gavel-slurm"
		return 1
	}
	echo "$line"
	uid=$(cut -d: -f3 <<<"$line")
	shell=$(cut -d: -f7 <<<"$line")
	[ "$uid" -lt 1000 ] || {
		echo "uid $uid is not a system uid"
		return 1
	}
	[ "$shell" = /usr/sbin/nologin ] || {
		echo "shell $shell"
		return 1
	}
	in_root getent group gavel-slurm
}

# verify_units wants no message at all: systemd only warns about an
# unknown or misspelt directive, and then ignores it.
verify_units() {
	local out
	out=$(in_root systemd-analyze verify /usr/lib/systemd/system/gavel-slurm.service \
		/usr/lib/systemd/system/gavel-slurm-collector.service 2>&1) || {
		echo "$out"
		return 1
	}
	[ -z "$out" ] || {
		echo "$out"
		return 1
	}
}

# The daemon's exposure must stay low; the collector, root with a
# capability and the devices, scores higher by design. MAX is in tenths
# (systemd's threshold): 20 is an exposure of 2.0.
security_of() { # security_of UNIT MAX
	in_root systemd-analyze security --offline=true --threshold="$2" "/usr/lib/systemd/system/$1" | tail -n 3
}

version_runs() {
	local out want
	out=$(chroot --userspec=gavel-slurm:gavel-slurm "$run" /usr/bin/gavel-slurm version)
	echo "$out"
	want="gavel-slurm ${VERSION:-}"
	[[ $out == "$want"* ]]
}

collector_runs() {
	in_root /usr/bin/gavel-slurm collector --fake-gpus v100:2 --once --print --node pkgtest --jobs-dir /nonexistent \
		--progress-dir /nonexistent | head -c 300
	echo
	in_root /usr/bin/gavel-slurm collector --fake-gpus v100:2 --once --print --node pkgtest --jobs-dir /nonexistent \
		--progress-dir /nonexistent | grep -q '"pkgtest"'
}

# upgrade installs the same package under a higher version: the admin's
# edit of the configuration must survive, with no question asked.
upgrade_keeps_config() {
	echo "# edited by package-test" >>"$run/etc/gavel-slurm/gavel-slurm.toml"
	rm -rf "$state/repack"
	dpkg-deb -R "$deb" "$state/repack"
	sed -i 's/^Version: .*/&+1/' "$state/repack/DEBIAN/control"
	dpkg-deb -b "$state/repack" "$run/tmp/gavel-slurm-next.deb" >/dev/null
	in_root dpkg -i /tmp/gavel-slurm-next.deb </dev/null
	tail -n 1 "$run/etc/gavel-slurm/gavel-slurm.toml" | grep -q 'edited by package-test'
}

remove_keeps_config_purge_drops_it() {
	in_root dpkg -r gavel-slurm
	[ ! -e "$run/usr/bin/gavel-slurm" ] || {
		echo "binary left after remove"
		return 1
	}
	[ -f "$run/etc/gavel-slurm/gavel-slurm.toml" ] || {
		echo "configuration removed by remove"
		return 1
	}
	in_root getent passwd gavel-slurm >/dev/null || {
		echo "user removed"
		return 1
	}
	in_root dpkg -P gavel-slurm
	[ ! -e "$run/etc/gavel-slurm/gavel-slurm.toml" ] || {
		echo "configuration left after purge"
		return 1
	}
}

# useradd_fallback reinstalls where systemd-sysusers is missing (minimal
# systems, containers): the install script must create the user itself.
useradd_fallback() {
	in_root userdel gavel-slurm 2>/dev/null || true
	in_root groupdel gavel-slurm 2>/dev/null || true
	local sysusers
	sysusers=$(in_root sh -c 'command -v systemd-sysusers') || true
	[ -z "$sysusers" ] || mv "$run$sysusers" "$run$sysusers.hidden"
	in_root dpkg -i /tmp/gavel-slurm.deb </dev/null
	[ -z "$sysusers" ] || mv "$run$sysusers.hidden" "$run$sysusers"
	system_user
}

rpm_matches_deb() {
	local debfiles rpmfiles
	debfiles=$(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {print $6}' | sed 's|^\./|/|' | sort)
	rpmfiles=$(rpm -qp --qf '[%{FILEMODES:perms} %{FILENAMES}\n]' "$rpmfile" 2>/dev/null | awk '$1 !~ /^d/ {print $2}' | sort)
	diff <(echo "$debfiles") <(echo "$rpmfiles") && rpm -qpc "$rpmfile" | grep -qx /etc/gavel-slurm/gavel-slurm.toml
}

# ---------------------------------------------------------------- main
trap umount_run EXIT
build_base
fresh_root
cp "$deb" "$run/tmp/gavel-slurm.deb"
say "installing $(basename "$deb") into a fresh $suite root"
if ! in_root sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends --no-download /tmp/gavel-slurm.deb' \
	>"$state/install.log" 2>&1; then
	# The cached dependencies may be stale: try again with the network.
	in_root sh -c 'DEBIAN_FRONTEND=noninteractive apt-get update -qq && apt-get install -y -qq --no-install-recommends /tmp/gavel-slurm.deb' \
		>>"$state/install.log" 2>&1 || {
		tail -n 20 "$state/install.log" >&2
		die "installing the .deb failed; log in $state/install.log"
	}
fi

check "package installed" in_root dpkg-query -W -f='${Status} ${Version}\n' gavel-slurm
check "files in place" files_present
check "no tests in contrib" no_tests_shipped
check "tables, license and configuration as in the source tree" tables_match_source
check "/usr/bin/gavel-slurm mode 755" mode_is /usr/bin/gavel-slurm 755
check "Prolog script executable" mode_is /usr/share/gavel-slurm/contrib/slurm/gavel-prolog.sh 755
check "configuration files are conffiles" conffiles
check "system user and group gavel-slurm" system_user
check "systemd-analyze verify of both units" verify_units
check "daemon unit exposure at most 2.0 (systemd-analyze security)" security_of gavel-slurm.service 20
check "collector unit exposure at most 3.0 (systemd-analyze security)" security_of gavel-slurm-collector.service 30
check "gavel-slurm version runs as gavel-slurm" version_runs
check "collector runs on fake GPUs" collector_runs
check "upgrade keeps an edited configuration" upgrade_keeps_config
check "remove keeps the configuration and the user, purge drops the configuration" remove_keeps_config_purge_drops_it
check "install creates the user with useradd where systemd-sysusers is missing" useradd_fallback
if [ -n "$rpmfile" ] && command -v rpm >/dev/null; then
	check ".rpm holds the same files as the .deb, configuration marked" rpm_matches_deb
else
	say "the .rpm was not compared (no .rpm, or no rpm command)"
fi

if [ "$failures" -gt 0 ]; then
	say "$failures check(s) FAILED ($((SECONDS - started))s); logs in $state"
	exit 1
fi
say "all checks passed in $((SECONDS - started))s"
