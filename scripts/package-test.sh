#!/usr/bin/env bash
# Installs the .deb from `make package` into a fresh Debian root and checks
# it: files and their modes, the configuration kept across an upgrade and
# a removal, the system user, `systemd-analyze verify` and an offline
# `systemd-analyze security` of both units, and the binary running there
# (`version`, and the collector on fake GPUs). Also compares the .rpm's
# file list with the .deb's when rpm is installed. Where systemd-nspawn is
# installed (apt-get install systemd-container), it then boots a second
# fresh root with systemd and runs both units for real: the daemon in dry
# run against a slurmrestd that is not there, the collector on fake GPUs
# reporting to it, all inside the container's own network namespace.
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
#   PACKAGE_TEST_BOOT=0    leave out the boot of the units
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

# man_renders formats the installed page with the root's own man, if it
# has one (a minimal root may not), and otherwise with the host's groff.
man_renders() {
	local page=/usr/share/man/man1/gavel-slurm.1 out
	# ASCII output with overstrikes removed, so that hyphens stay "-".
	if in_root sh -c 'command -v man' >/dev/null 2>&1; then
		out=$(in_root env MANWIDTH=80 MANROFFOPT=-Tascii man -l "$page" 2>&1) || return 1
	else
		out=$(groff -man -Tascii -ww "$run$page" 2>&1) || return 1
	fi
	out=$(sed 's/.\x08//g' <<<"$out")
	grep -q "gavel-slurm daemon" <<<"$out" || {
		echo "the page does not render the daemon's synopsis:"
		head -n 20 <<<"$out"
		return 1
	}
}

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
		/usr/share/doc/gavel-slurm/packaging.md /usr/share/man/man1/gavel-slurm.1; do
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

# install_deb installs the package in the fresh root, its dependencies from
# the root's cache, or from the network when the cache falls short.
install_deb() {
	cp "$deb" "$run/tmp/gavel-slurm.deb"
	in_root sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends --no-download /tmp/gavel-slurm.deb' \
		>>"$state/install.log" 2>&1 && return
	in_root sh -c 'DEBIAN_FRONTEND=noninteractive apt-get update -qq && apt-get install -y -qq --no-install-recommends /tmp/gavel-slurm.deb' \
		>>"$state/install.log" 2>&1 && return
	tail -n 20 "$state/install.log" >&2
	return 1
}

# ---------------------------------------------------------------- boot
# The units under a real systemd, in a container (systemd-nspawn) booted on
# a fresh root with the package installed and configured for a dry run.

container_pid=
container_leader=

stop_container() {
	[ -n "$container_pid" ] || return 0
	if [ -n "$container_leader" ]; then
		nsenter -t "$container_leader" -a systemctl poweroff >/dev/null 2>&1 || true
	fi
	for _ in $(seq 100); do
		kill -0 "$container_pid" 2>/dev/null || break
		sleep 0.2
	done
	kill "$container_pid" 2>/dev/null || true
	container_pid=''
	container_leader=''
}

cleanup() {
	stop_container
	umount_run
}

in_container() { nsenter -t "$container_leader" -a "$@"; }

# http_get PORT PATH, inside the container, with bash alone.
http_get() {
	in_container bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf "GET %s HTTP/1.0\r\n\r\n" "$2" >&3 && cat <&3' sh "$1" "$2"
}

configure_for_boot() {
	local c="$run/etc/gavel-slurm"
	# Dry run, a slurmrestd that does not exist, collector reports on.
	sed -i -e 's/^dry_run = false/dry_run = true/' -e 's|^rest_url = .*|rest_url = "http://127.0.0.1:9"|' \
		-e 's|^# collector_listen = .*|collector_listen = "127.0.0.1:8391"|' "$c/gavel-slurm.toml"
	grep -q '^collector_listen = "127.0.0.1:8391"' "$c/gavel-slurm.toml" || {
		echo "cannot turn collector_listen on in gavel-slurm.toml"
		return 1
	}
	# Made-up secrets; on one host the collector (root) and the daemon
	# (gavel-slurm) read the same token file.
	printf 'not-a-real-token' >"$c/slurm.jwt"
	head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$c/collector.token"
	in_root chown gavel-slurm:gavel-slurm /etc/gavel-slurm/slurm.jwt /etc/gavel-slurm/collector.token
	chmod 600 "$c/slurm.jwt" "$c/collector.token"
	sed -i -e 's|^GAVEL_DAEMON_URL=.*|GAVEL_DAEMON_URL=http://127.0.0.1:8391|' \
		-e 's|^GAVEL_COLLECTOR_ARGS=.*|GAVEL_COLLECTOR_ARGS=--fake-gpus v100:2 --interval 1s|' "$c/collector.env"
	local u
	for u in gavel-slurm gavel-slurm-collector; do
		ln -sf "/usr/lib/systemd/system/$u.service" "$run/etc/systemd/system/multi-user.target.wants/$u.service"
	done
}

boot_container() {
	umount "$run/proc"
	# A host with the hybrid cgroup layout needs the unified hierarchy for
	# the container's systemd (recent releases dropped cgroup v1).
	SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1 setsid systemd-nspawn -q -D "$run" --boot --private-network \
		--register=no --keep-unit --machine=gavel-package-test \
		</dev/null >"$state/console.log" 2>&1 9>&- &
	container_pid=$!
	local state_now
	for _ in $(seq 300); do
		container_leader=$(pgrep -P "$container_pid" | head -n 1) || true
		if [ -n "$container_leader" ]; then
			state_now=$(in_container systemctl is-system-running 2>/dev/null) || true
			case "$state_now" in running | degraded) return 0 ;; esac
		fi
		kill -0 "$container_pid" 2>/dev/null || break
		sleep 0.2
	done
	tail -n 20 "$state/console.log"
	echo "the container did not boot (state: ${state_now:-none})"
	return 1
}

daemon_unit_runs() {
	in_container systemctl is-active gavel-slurm.service &&
		in_container ps -o user=,cmd= -C gavel-slurm | grep -E '^gavel-s.* daemon ' &&
		http_get 8390 /healthz | tail -n 1 | grep -x ok &&
		in_container stat -c '%U %a %n' /var/lib/gavel-slurm /var/lib/gavel-slurm/state.db |
		tee /dev/stderr | head -n 1 | grep -qx 'gavel-slurm 750 /var/lib/gavel-slurm'
}

daemon_unit_reloads() {
	in_container systemctl reload gavel-slurm.service
	for _ in $(seq 50); do
		in_container journalctl -u gavel-slurm.service -o cat --no-pager | grep -q '"configuration reloaded"' && return 0
		sleep 0.2
	done
	in_container journalctl -u gavel-slurm.service -o cat --no-pager | tail -n 5
	return 1
}

collector_unit_reports() {
	local pid caps
	in_container systemctl is-active gavel-slurm-collector.service
	pid=$(in_container systemctl show -p MainPID --value gavel-slurm-collector.service)
	caps=$(in_container sed -n 's/^CapEff:\s*//p' "/proc/$pid/status")
	echo "collector capabilities: $caps"
	# CAP_DAC_READ_SEARCH (bit 2) only.
	[ "$caps" = 0000000000000004 ] || return 1
	for _ in $(seq 50); do
		http_get 8390 /metrics | grep -E '^gavel_slurm_collector_reports_total\{result="accepted"\} [1-9]' && return 0
		sleep 0.2
	done
	http_get 8390 /metrics | grep collector_reports
	in_container journalctl -u gavel-slurm-collector.service -o cat --no-pager | tail -n 5
	return 1
}

boot_checks() {
	if [ "${PACKAGE_TEST_BOOT:-}" = 0 ]; then
		say "units not booted: PACKAGE_TEST_BOOT=0"
		return
	fi
	if ! command -v systemd-nspawn >/dev/null; then
		say "units not booted: no systemd-nspawn here (apt-get install systemd-container)"
		return
	fi
	say "booting a fresh root with systemd to run both units"
	fresh_root
	install_deb || {
		bad "install for the boot (log in $state/install.log)"
		return
	}
	local before=$failures
	check "configured for a dry run with collector reports" configure_for_boot
	check "container boots with systemd" boot_container
	[ "$failures" -eq "$before" ] || {
		stop_container
		return
	}
	check "daemon unit runs as gavel-slurm, answers /healthz, keeps its state" daemon_unit_runs
	check "systemctl reload rereads the configuration" daemon_unit_reloads
	check "collector unit runs with one capability and its reports are accepted" collector_unit_reports
	stop_container
}

# ---------------------------------------------------------------- main
trap cleanup EXIT
build_base
fresh_root
say "installing $(basename "$deb") into a fresh $suite root"
install_deb || die "installing the .deb failed; log in $state/install.log"

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
check "man gavel-slurm renders the manual page" man_renders
check "collector runs on fake GPUs" collector_runs
check "upgrade keeps an edited configuration" upgrade_keeps_config
check "remove keeps the configuration and the user, purge drops the configuration" remove_keeps_config_purge_drops_it
check "install creates the user with useradd where systemd-sysusers is missing" useradd_fallback
if [ -n "$rpmfile" ] && command -v rpm >/dev/null; then
	check ".rpm holds the same files as the .deb, configuration marked" rpm_matches_deb
else
	say "the .rpm was not compared (no .rpm, or no rpm command)"
fi
boot_checks

if [ "$failures" -gt 0 ]; then
	say "$failures check(s) FAILED ($((SECONDS - started))s); logs in $state"
	exit 1
fi
say "all checks passed in $((SECONDS - started))s"
