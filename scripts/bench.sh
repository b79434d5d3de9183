#!/usr/bin/env bash
# Benchmarks: go test -bench over every package, with memory figures.
set -euo pipefail
go test -run '^$' -bench . -benchmem ./...
