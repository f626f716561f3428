#!/usr/bin/env bash
# make check: every suite, continuing past failures; closes with the total
# "N passed, N failed" line and fails if anything failed.
#
# Two lanes at once, because the guest is the long pole and runs under TCG
# (testbed/README.md: nested KVM does not work here) on one or two cores:
#   guest lane: the real-kernel suites (ctest/vm_suite.sh, then siw's boot),
#               printed as they run;
#   host lane:  everything that needs no guest (unit, crate, ABI, the other
#               architectures, sanitizers, install, the fresh Debian 12
#               root, the packages), each line prefixed "host| ".
# The lanes share nothing they write (their own ctest/out/ files, build
# directories and caches; apt-get and testbed/vm.sh prepare wait for their
# locks), and each step's time is its own lane's. RSVERBS_CHECK_SERIAL=1
# runs the steps one after another, the host lane first.
# RSVERBS_CHECK_AFTER_HOST="CMD" runs CMD in the host lane after its steps
# (.ci/run: the next steps' downloads and builds while the guest runs).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
mkdir -p ctest/out
rm -f ctest/out/*.results
start=$(date +%s)
host_steps="ctest/unit.sh ctest/crate.sh ctest/header_fresh.sh ctest/abi.sh ctest/crossarch.sh ctest/unload.sh ctest/unwind.sh ctest/sanitize.sh ctest/install.sh ctest/freshroot.sh ctest/deb.sh"
guest_steps="ctest/vm_suite.sh ctest/vm_siw.sh"
# lane STEP...: runs each step, its time and a FAILED line; the lane's
# status is 1 when any step failed.
lane() {
  local rc=0 t step
  for step in "$@"; do
    echo "=== $step"
    t=$(date +%s)
    "$step" || { rc=1; echo "=== $step FAILED" >&2; }
    echo "=== $step: $(( $(date +%s) - t )) s"
  done
  return $rc
}
host_lane() {
  local rc=0 t
  # shellcheck disable=SC2086 # the step lists are words
  lane $host_steps || rc=1
  if [ -n "${RSVERBS_CHECK_AFTER_HOST:-}" ]; then
    echo "=== after the host lane: $RSVERBS_CHECK_AFTER_HOST"
    t=$(date +%s)
    bash -c "$RSVERBS_CHECK_AFTER_HOST" || { rc=1; echo "=== $RSVERBS_CHECK_AFTER_HOST FAILED" >&2; }
    echo "=== after the host lane: $(( $(date +%s) - t )) s"
  fi
  echo "=== host lane done in $(( $(date +%s) - start )) s"
  return $rc
}
# The guest's whole-boot timeout (ctest/vm_suite.sh's 1,500 s) with room
# for the host lane's builds beside it.
export RSVERBS_VM_TIMEOUT=${RSVERBS_VM_TIMEOUT:-3000}
rc=0
if [ "${RSVERBS_CHECK_SERIAL:-0}" = 1 ]; then
  host_lane || rc=1
  # shellcheck disable=SC2086
  lane $guest_steps || rc=1
else
  # The host lane's lines, prefixed, as they come (sed -u: whole lines, so
  # the two lanes' lines do not mix within one).
  { host_lane 2>&1; echo $? > ctest/out/.host-lane.rc; } | sed -u 's/^/host| /' &
  hpid=$!
  # shellcheck disable=SC2086
  lane $guest_steps || rc=1
  echo "=== guest lane done in $(( $(date +%s) - start )) s"
  wait "$hpid"
  [ "$(cat ctest/out/.host-lane.rc 2>/dev/null)" = 0 ] || rc=1
  rm -f ctest/out/.host-lane.rc
fi
echo "=== make check summary ($(( $(date +%s) - start )) s)"
ctest/summary.sh || rc=1
exit $rc
