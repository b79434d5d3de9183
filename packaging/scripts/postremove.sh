#!/bin/sh
# gavel-slurm package: after the files are gone (.deb postrm, .rpm %postun).
# The gavel-slurm user stays, as Debian and Fedora keep system users: files
# it owns may remain. A .deb purge also removes the daemon's state.
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
if [ "$1" = purge ]; then
	rm -rf /var/lib/gavel-slurm
fi
exit 0
