# gavel-slurm: `make demo` runs the main job, `make test` runs every test,
# `make fuzz` runs every fuzz target for FUZZTIME each.
# Each target installs what it needs on a fresh Debian machine.

GO ?= go
BIN := bin/gavel-slurm
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all deps build test unit-test python-test integration-test fuzz bench demo fmt vet slurm-up slurm-down clean

all: build

deps:
	@bash scripts/deps.sh

build: deps
	@echo "build: $(BIN)"
	@mkdir -p bin
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/gavel-slurm

fmt:
	gofmt -l -w $$(git ls-files '*.go')

vet: deps
	$(GO) vet ./...

# Unit tests, then the integration tests that need a real local Slurm.
test: build vet unit-test python-test integration-test

# GAVEL_REQUIRE_CHROMIUM: the browser checks of generated HTML pages fail
# instead of skipping when Chromium is missing (test-deps installs it).
unit-test: deps test-deps
	@echo "test: unit tests"
	GAVEL_REQUIRE_CHROMIUM=1 $(GO) test -count=1 ./...

.PHONY: test-deps
test-deps:
	@bash scripts/test-deps.sh

# The training-loop helper shipped for users (contrib/python).
python-test:
	@echo "test: python helper"
	python3 -m unittest discover contrib/python

integration-test: build
	@bash scripts/integration-test.sh

# Every fuzz target of the repository (func FuzzX in a _test.go file),
# found by name so that new ones join without a change here, each run for
# FUZZTIME one after another: go test fuzzes one target at a time. Not
# part of `make test`.
FUZZTIME ?= 60s

fuzz: deps
	@set -e; \
	for file in $$(grep -rlE --include='*_test.go' --exclude-dir=.local --exclude-dir=.git '^func Fuzz[A-Za-z0-9_]*\(' . | sort); do \
		pkg=$$(dirname "$$file"); \
		for target in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$file"); do \
			echo "fuzz: $$pkg $$target for $(FUZZTIME)"; \
			$(GO) test -run='^$$' -fuzz="^$$target\$$" -fuzztime=$(FUZZTIME) "$$pkg"; \
		done; \
	done

bench: build
	@bash scripts/bench.sh

demo: build
	@bash scripts/demo.sh

# contrib/slurm/job_submit.lua against the daemon's tag parser, with every
# Lua interpreter installed (also part of unit-test, which skips it when
# there is no Lua; here a missing Lua is an error).
.PHONY: lua-test
lua-test: deps
	GAVEL_REQUIRE_LUA=1 $(GO) test -count=1 ./contrib/slurm/

# docs/gavel-slurm.1 from the commands' own help (`gavel-slurm man`);
# TestManPageIsCurrent fails until it is rerun after a flag changes.
.PHONY: man
man: build
	$(BIN) man > docs/gavel-slurm.1.tmp && mv docs/gavel-slurm.1.tmp docs/gavel-slurm.1

# .deb and .rpm in bin/package (scripts/package.sh, packaging/); the
# check in a fresh Debian root is scripts/package-test.sh.
.PHONY: package package-test
package: deps
	@VERSION=$(VERSION) bash scripts/package.sh

package-test: package
	@VERSION=$(VERSION) bash scripts/package-test.sh

# The local Slurm (scripts/slurm/README.md): SLURM_RELEASE=24.11 (default)
# or 26.05, one release at a time; slurm-down stops whichever runs.
# integration-test runs against each of SLURM_RELEASES ("24.11 26.05").
slurm-up:
	@bash scripts/slurm-up.sh

slurm-down:
	@bash scripts/slurm-down.sh

clean:
	rm -rf bin

# The scale scenario (scripts/scale-test.sh): the local Slurm with many
# emulated GPU nodes, thousands of tagged jobs, the daemon's round times,
# slurmctld's RPCs per round, the daemon's RSS and users' command latency.
# Not part of `make test`. SCALE_JOBS, SCALE_NODES, SCALE_ROUND and
# SCALE_ROUNDS size it (docs/evaluation.md, "Site scale").
.PHONY: scale-test
scale-test: deps
	scripts/scale-test.sh
