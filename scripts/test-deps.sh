#!/usr/bin/env bash
# Installs what the unit tests need beyond scripts/deps.sh: Chromium, for
# the browser checks of generated HTML pages (internal/browsertest,
# internal/htmlpage). About 125 MB to download from Debian 12 with
# --no-install-recommends. Idempotent: does nothing when a Chromium is on
# PATH already.
set -euo pipefail

for name in chromium chromium-browser google-chrome-stable google-chrome; do
  if command -v "$name" >/dev/null; then
    exit 0
  fi
done
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "test-deps: installing chromium (apt-get)"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null
command -v chromium >/dev/null || { echo "test-deps: chromium still not on PATH" >&2; exit 1; }
echo "test-deps: ok ($(chromium --version 2>/dev/null | head -n 1))"
