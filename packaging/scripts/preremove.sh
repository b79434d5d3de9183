#!/bin/sh
# gavel-slurm package: before the files go. The .deb's prerm gets "remove"
# (or "upgrade" when a new version replaces this one); the .rpm's %preun
# gets 0 on removal, 1 or more on upgrade. Only a removal stops the
# services: an upgrade restarts them afterwards.
set -e
case "$1" in
remove | 0)
	if [ -d /run/systemd/system ]; then
		systemctl --no-reload disable --now gavel-slurm.service gavel-slurm-collector.service >/dev/null 2>&1 || true
	fi
	;;
esac
exit 0
