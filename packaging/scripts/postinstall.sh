#!/bin/sh
# gavel-slurm package: after the files are in place. The same script serves
# the .deb (postinst; $1 is "configure", $2 the version replaced, if any)
# and the .rpm (%post; $1 is 1 on install, 2 or more on upgrade).
set -e

user=gavel-slurm

# The daemon's system user, from the sysusers.d file the package ships, or
# with useradd where systemd-sysusers is missing or fails (a chroot without
# /proc, an old release).
if ! getent passwd "$user" >/dev/null 2>&1; then
	if command -v systemd-sysusers >/dev/null 2>&1; then
		systemd-sysusers /usr/lib/sysusers.d/gavel-slurm.conf || true
	fi
	if ! getent passwd "$user" >/dev/null 2>&1; then
		useradd --system --user-group --home-dir /var/lib/gavel-slurm --no-create-home \
			--shell /usr/sbin/nologin --comment "gavel-slurm scheduler daemon" "$user"
	fi
fi

# Earlier packages made /run/gavel-slurm the daemon's runtime directory,
# owned by its user. It is the Prolog's now, which writes there as root and
# refuses a directory anyone else owns: give it back to root (a reboot
# would too, /run being a tmpfs).
if [ -d /run/gavel-slurm ] && [ ! -L /run/gavel-slurm ] && [ "$(stat -c %u /run/gavel-slurm)" != 0 ]; then
	chown root:root /run/gavel-slurm && chmod 0755 /run/gavel-slurm || true
fi

# Services are left disabled (the site configures Slurm's side first, see
# /usr/share/doc/gavel-slurm/packaging.md), but an upgrade restarts the
# ones that run, so that they run the new binary. A restart is safe at any
# moment: the daemon's journal finishes or undoes what was in flight.
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
	upgrade=no
	case "$1" in
	configure) [ -n "$2" ] && upgrade=yes ;;
	[2-9] | [1-9][0-9]*) upgrade=yes ;;
	esac
	if [ "$upgrade" = yes ]; then
		systemctl try-restart gavel-slurm.service gavel-slurm-collector.service >/dev/null 2>&1 || true
	fi
fi
exit 0
