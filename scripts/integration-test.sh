#!/usr/bin/env bash
# Integration tests against real local Slurm releases. For each release in
# SLURM_RELEASES, one after another: bring it up (scripts/slurm-up.sh with
# SLURM_RELEASE set), export its .local/slurm/env, run every Go test with
# the `integration` build tag, bring it down; then the next release. Every
# release runs even when an earlier one failed; the run fails when any
# failed. At the end it prints, per release, how long the root build, the
# bring-up and the tests took, and the tests that failed.
#
#   SLURM_RELEASES="24.11 26.05"  the releases, in order (the default; CI covers both)
#   SKIP_SLURM=1   skip everything (machines that cannot run Slurm; CI must not set it)
#   KEEP_SLURM=1   leave the last release's Slurm running afterwards even if
#                  this run started it (earlier ones must make room for the next)
#   INTEGRATION_PACKAGES=./pkg/...  narrow the test run (default: the packages
#                  with integration tests; the others' unit tests ran in unit-test)
#
# A release's Slurm that was already up (`make demo` leaves one up) is used
# as it is. Only one release runs at a time, so to test another this run
# stops it (slurm-up.sh with SLURM_SWITCH=1), and brings it back up at the
# end (seconds, from its cached root), so that `make demo` followed by
# `make test` works.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${SKIP_SLURM:-}" = 1 ]; then
  echo "integration: SKIPPED because SKIP_SLURM=1 (no Slurm integration tests ran)"
  exit 0
fi

releases=(${SLURM_RELEASES:-24.11 26.05})
[ "${#releases[@]}" -gt 0 ] || {
  echo "integration: SLURM_RELEASES is empty" >&2
  exit 2
}
# By default the packages that have integration tests (a _test.go file
# with the integration build tag), found by name so that new ones join:
# the other packages' tests are unit tests, which `make unit-test` has run
# already and which need no Slurm.
integration_packages() {
  grep -rl --include='*_test.go' --exclude-dir=.local --exclude-dir=.git '^//go:build integration' . |
    xargs -r -n1 dirname | sort -u | tr '\n' ' '
}
packages=${INTEGRATION_PACKAGES:-$(integration_packages)}
[ -n "${packages// /}" ] || {
  echo "integration: no package has integration tests" >&2
  exit 2
}
# Scenarios whose outcome depends on the daemon's logic, not on what the
# release's Slurm or slurmrestd does (the requests they make are the same
# as other tests', which run on every release): they run on the last
# release only, which keeps the whole run within CI's time. A test that
# exercises a release's own behaviour (REST versions, requeue paths,
# leases, accounting, arrays, what Slurm records) runs on every release.
one_release_tests='^(TestSlowRestartsAreFewerUnderTheRestartMechanism|TestFairShareAccountsAreTheEntities|TestRoundsTimeShareGPUsAndLeaveUnmanagedJobsAlone|TestSIGKILLDuringAGracePeriodLosesNoJob|TestSIGKILLMidRoundLosesNothingAndRepeatsNothing|TestMeasuredThroughputsEndToEnd|TestJobsSlurmCannotStartLeaveNoGPUIdle|TestStandbyTakesOverAfterSIGKILLWithoutRepeating)$'
# The tests that need GPU shards (docs/space-sharing.md).
share_tests='^(TestIntegrationSharedPairRunsOnOneGPU|TestIntegrationShardPlacementNeedsOneSharing|TestPackedPolicyRunsAPairOnOneGPU|TestPackedPairMovesOffANodeThatFilled)$'

env_file=.local/slurm/env
logs=$(mktemp -d)

# running_release prints the release whose stack works now ("" when none):
# the env file exists only while one does, and names its release (an env
# file written before releases existed is 24.11's).
running_release() {
  [ -f "$env_file" ] || return 0
  local r
  r=$(sed -n 's/^SLURM_RELEASE=//p' "$env_file")
  printf '%s' "${r:-24.11}"
}

started=""  # the release this run started and has not stopped yet
before=$(running_release)  # the release that was up before this run
stop_started() {
  [ -n "$started" ] || return 0
  echo "integration: stopping the Slurm $started this run started"
  bash scripts/slurm-down.sh "$started" || echo "integration: slurm-down failed" >&2
  started=""
}
on_exit() {
  [ "${KEEP_SLURM:-}" = 1 ] || stop_started
  if [ -n "$before" ] && [ "$(running_release)" != "$before" ] && [ "${KEEP_SLURM:-}" != 1 ]; then
    echo "integration: bringing the Slurm $before that was up before this run back up"
    SLURM_SWITCH=1 SLURM_RELEASE=$before bash scripts/slurm-up.sh >/dev/null ||
      echo "integration: could not bring Slurm $before back up" >&2
  fi
  rm -rf "$logs"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

declare -A root_s up_s test_s result
failed=()
last=$((${#releases[@]} - 1))
for i in "${!releases[@]}"; do
  release=${releases[$i]}
  root_s[$release]=- up_s[$release]=- test_s[$release]=-
  echo
  echo "integration: ===== Slurm $release ====="
  was_up=0
  [ "$(running_release)" = "$release" ] && was_up=1

  t0=$SECONDS
  echo "integration: bringing up the local Slurm $release"
  if ! SLURM_SWITCH=1 SLURM_RELEASE=$release bash scripts/slurm-up.sh; then
    up_s[$release]=$((SECONDS - t0))
    result[$release]="FAILED (bring-up)"
    failed+=("$release")
    # What a failed start left of this release goes (never another
    # release's stack: slurm-up.sh may have refused because of it).
    [ "$was_up" = 1 ] || bash scripts/slurm-down.sh "$release" || true
    continue
  fi
  [ "$was_up" = 1 ] || started=$release
  total=$((SECONDS - t0))
  built=$(sed -n 's/^ROOT_BUILD_S=//p' .local/slurm/last-up 2>/dev/null)
  root_s[$release]=${built:-0}
  up_s[$release]=$((total - ${built:-0}))

  t1=$SECONDS
  skip=()
  if [ "$i" != "$last" ]; then
    skip=(-skip "$one_release_tests")
    echo "integration: the release-independent scenarios run on Slurm ${releases[$last]} only"
  fi
  echo "integration: go test -tags integration $packages against Slurm $release"
  # -p 1: the packages share one small cluster, so they take turns rather
  # than competing for its GPUs. A subshell keeps this release's settings
  # away from the next one.
  (
    set -a
    # shellcheck source=/dev/null
    source "$env_file"
    set +a
    # shellcheck disable=SC2086 # INTEGRATION_PACKAGES may name several
    go test -count=1 -p 1 -timeout 40m -tags integration "${skip[@]}" $packages
  ) 2>&1 | tee "$logs/$release.log"
  rc=${PIPESTATUS[0]}

  # GPU sharing needs shard lines in slurm.conf and gres.conf, which the
  # other tests do not expect: the same release again with shards on the
  # v100 and p100 nodes, for the tests of space sharing only (they skip
  # without it). Narrowed runs (INTEGRATION_PACKAGES) leave it out unless
  # SHARE_TESTS=1.
  if [ "$rc" = 0 ] && { [ -z "${INTEGRATION_PACKAGES:-}" ] || [ "${SHARE_TESTS:-}" = 1 ]; }; then
    echo "integration: Slurm $release again with GPU shards, for the space-sharing tests"
    if ! SLURM_GPU_SHARDS="v100:2 p100:2" SLURM_RELEASE=$release bash scripts/slurm-up.sh; then
      echo "integration: could not bring Slurm $release up with GPU shards" >&2
      rc=1
    else
      (
        set -a
        # shellcheck source=/dev/null
        source "$env_file"
        set +a
        go test -count=1 -p 1 -timeout 20m -tags integration -run "$share_tests" ./bridge/rest/ ./internal/daemon/
      ) 2>&1 | tee -a "$logs/$release.log"
      rc=${PIPESTATUS[0]}
      # Back to the usual configuration for whatever runs next.
      SLURM_RELEASE=$release bash scripts/slurm-up.sh >/dev/null || echo "integration: could not bring Slurm $release back without shards" >&2
    fi
  fi
  test_s[$release]=$((SECONDS - t1))
  if [ "$rc" = 0 ]; then
    result[$release]=ok
  else
    result[$release]="FAILED (tests)"
    failed+=("$release")
  fi

  # Make room for the next release; keep the last one only on request.
  if [ "$i" != "$last" ] || [ "${KEEP_SLURM:-}" != 1 ]; then
    stop_started
  fi
done

echo
echo "integration: summary (seconds; root build 0 = cached root)"
printf '  %-8s %10s %9s %7s  %s\n' release "root build" bring-up tests result
for release in "${releases[@]}"; do
  printf '  %-8s %10s %9s %7s  %s\n' "$release" "${root_s[$release]}" "${up_s[$release]}" \
    "${test_s[$release]}" "${result[$release]}"
done
for release in "${failed[@]}"; do
  [ -f "$logs/$release.log" ] || continue
  # Without -v, go test prints only what failing tests logged.
  fails=$(grep -E '^[[:space:]]*--- FAIL|^[[:space:]]+[^[:space:]]+_test\.go:[0-9]+:|^FAIL[[:space:]]|^panic:' "$logs/$release.log" || true)
  [ -z "$fails" ] || printf '\nintegration: failures on Slurm %s:\n%s\n' "$release" "$fails"
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "integration: FAILED on Slurm ${failed[*]}"
  exit 1
fi
echo "integration: passed on Slurm ${releases[*]}"
