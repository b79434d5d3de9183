#!/bin/sh
# gavel-slurm package: before the files go. The .deb's prerm gets "remove"
# (or "upgrade" when a new version replaces this one); the .rpm's %preun
# gets 0 on removal, 1 or more on upgrade. Only a removal stops the
# services (an upgrade restarts them afterwards) and hands the managed
# partitions back: every job the daemon touched as its owner submitted
# it, and its lease ended. Jobs it cannot restore are listed; they would
# anyway become Slurm's when the lease runs out.
set -e
case "$1" in
remove | 0)
	if [ -d /run/systemd/system ]; then
		systemctl --no-reload disable --now gavel-slurm.service gavel-slurm-collector.service >/dev/null 2>&1 || true
	fi
	if [ -f /etc/gavel-slurm/gavel-slurm.toml ] && [ -x /usr/bin/gavel-slurm ]; then
		# As the daemon's user, who owns its state and token.
		as=""
		if command -v runuser >/dev/null 2>&1 && id gavel-slurm >/dev/null 2>&1; then
			as="runuser -u gavel-slurm --"
		fi
		timeout 300 $as /usr/bin/gavel-slurm handback --config /etc/gavel-slurm/gavel-slurm.toml ||
			echo "gavel-slurm: handback did not finish (above); jobs left as the daemon had them become Slurm's when its lease runs out" >&2
	fi
	;;
esac
exit 0
