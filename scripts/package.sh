#!/usr/bin/env bash
# Builds gavel-slurm's .deb and .rpm into bin/package/ (`make package`).
#
# The binary is built here with `go build`, as `make build` does (the
# version goes in through -ldflags); the packages are assembled by nfpm,
# built from source at the version pinned in packaging/go.mod. What goes
# where is in packaging/nfpm.yaml. The binary links CLP and the C library
# of this machine: build on the distribution release the packages are for
# (or an older one).
#
#   VERSION         version the binary reports (default: git describe, as
#                   the Makefile); the package version is derived from it
#   PKG_MAINTAINER  the packages' Maintainer/Packager field
#   PACKAGE_FORMATS which packages to build (default "deb rpm")
#
# Prints the path of each package built.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
PACKAGE_FORMATS=${PACKAGE_FORMATS:-deb rpm}
out=bin/package
stage=$out/stage # named in packaging/nfpm.yaml

say() { printf 'package: %s\n' "$*" >&2; }

# package_version turns the binary's version into one that dpkg and rpm
# order correctly: a release tag v1.2.3 gives 1.2.3; commits after it
# 1.2.3+git5.gabc1234; a tree without a release tag (git describe gives
# the commit's hash, which may start with digits) 0.0.0+git<commits>.<hash>, so
# that a later commit is a newer package. '-' is not allowed in an rpm
# version: it becomes '.'.
package_version() {
	local v=${1#v} base rest
	if [[ $v =~ ^[0-9]+(\.[0-9]+)+([~][0-9A-Za-z.]+)? ]]; then
		base=${BASH_REMATCH[0]}
		rest=${v#"$base"}
		rest=${rest#-}
	else
		base=0.0.0
		rest="git$(git rev-list --count HEAD 2>/dev/null || echo 0).$v"
	fi
	rest=$(printf '%s' "$rest" | tr -- '-' '.' | tr -cd '0-9A-Za-z.')
	if [ -n "$rest" ]; then
		[[ $rest == git* ]] || rest="git$rest"
		printf '%s+%s\n' "$base" "$rest"
	else
		printf '%s\n' "$base"
	fi
}

# stage_contrib copies the contrib files git tracks, without their tests,
# keeping git's file modes (the Slurm scripts are executable).
stage_contrib() {
	rm -rf "$stage/contrib"
	local mode file
	while read -r mode _ _ file; do
		case "$file" in
		*_test.go | */testdata/* | */test_*.py | */.gitignore) continue ;;
		esac
		install -D -m "${mode: -3}" "$file" "$stage/$file"
	done < <(git ls-files -s -- contrib)
}

if [ "${1:-}" = --print-version ]; then
	package_version "$VERSION"
	exit 0
fi

mkdir -p "$stage"
export PKG_VERSION PKG_ARCH PKG_MAINTAINER SOURCE_DATE_EPOCH
PKG_VERSION=$(package_version "$VERSION")
PKG_ARCH=$($GO env GOARCH)
PKG_MAINTAINER=${PKG_MAINTAINER:-gavel-slurm packagers <packaging@gavel-slurm.invalid>}
# File times from the commit (nfpm reads SOURCE_DATE_EPOCH), so that the
# same commit packs the same way.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

say "building bin/gavel-slurm $VERSION for $PKG_ARCH"
CGO_ENABLED=1 $GO build -trimpath -ldflags "-X main.version=$VERSION" -o "$stage/gavel-slurm" ./cmd/gavel-slurm
stage_contrib

say "building nfpm (version pinned in packaging/go.mod)"
(cd packaging && $GO build -o ../bin/nfpm github.com/goreleaser/nfpm/v2/cmd/nfpm)

rm -f "$out"/gavel-slurm*.deb "$out"/gavel-slurm*.rpm
for format in $PACKAGE_FORMATS; do
	say "packing the .$format, version $PKG_VERSION"
	bin/nfpm package --config packaging/nfpm.yaml --packager "$format" --target "$out/" >&2
done
ls -1 "$out"/gavel-slurm*.deb "$out"/gavel-slurm*.rpm 2>/dev/null || true
