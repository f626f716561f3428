#!/usr/bin/env bash
# make check: every suite, continuing past failures; closes with the total
# "N passed, N failed" line and fails if anything failed.
#
# Two lanes at once, because the guest is the long pole and runs under TCG
# (testbed/README.md: nested KVM does not work here):
#   guest lane: the real-kernel suites (ctest/vm_suite.sh, then siw's boot)
#               but those of make check-more (ctest/suites.sh), printed as
#               they run;
#   host lane:  everything that needs no guest (unit, crate, ABI, the other
#               architectures, sanitizers, install, the fresh Debian 12
#               root, the packages), each line prefixed "host| ", at the
#               lowest CPU priority (nice 19): on 2 cores the guest's vCPU
#               threads come first, the builds take what they leave.
# The lanes share nothing they write (their own ctest/out/ files, build
# directories and caches; apt-get and testbed/vm.sh prepare wait for their
# locks), and each step's time is its own lane's.
#   RSVERBS_CHECK_SERIAL=1        the steps one after another, host lane first
#   RSVERBS_CHECK_ONLY=host|guest that lane alone, without clearing
#                                 ctest/out/*.results or the total (.ci/run
#                                 runs both lanes itself, with its other steps)
#   RSVERBS_CHECK_PREFETCH="CMD"  CMD in the host lane after its quick steps,
#                                 once the guest has had time to prepare its
#                                 own boot (.ci/run: the next steps' kernels,
#                                 userlands and test programs)
#   RSVERBS_FRESHROOT_ARCHES      the architectures the fresh Debian 12 root
#                                 also builds from nothing (make ARCH=...);
#                                 none by default: that is make
#                                 check-freshroot's and CI's rotation's
#                                 (.ci/run), the host lane's long pole
# A step that fails counts as failed in the closing line even when it wrote
# no FAIL result (it died before its results, or failed in its setup): one
# "FAIL step ..." line in ctest/out/steps.results. ctest/check_self.sh tests
# that, with the step lists below replaced (RSVERBS_CHECK_HOST_STEPS,
# RSVERBS_CHECK_GUEST_STEPS; RSVERBS_CHECK_OUT for the results' directory).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${RSVERBS_CHECK_OUT:-ctest/out}
mkdir -p "$out"
only=${RSVERBS_CHECK_ONLY:-}
case $only in
  "" | host | guest) ;;
  *) echo "check: RSVERBS_CHECK_ONLY=$only: host or guest" >&2; exit 2 ;;
esac
[ -n "$only" ] || rm -f "$out"/*.results
start=$(date +%s)
# Quick steps first, so that the prefetch starts early; the long builds last.
host_quick="ctest/unit.sh ctest/crate.sh ctest/check_self.sh ctest/docs.sh ctest/abi.sh ctest/unload.sh ctest/unwind.sh ctest/install.sh"
# include/rsverbs.h against cbindgen's output: CI's (and make check-abi's),
# for cbindgen's pinned version is built from source the first time, 251 s
# of a cold make check's host lane (the long pole) at 6e52e21.
full=${RSVERBS_CHECK_FULL:-0}
[ "$full" != 1 ] || host_quick="$host_quick ctest/header_fresh.sh"
host_long="ctest/crossarch.sh ctest/sanitize.sh"
# The fresh Debian 12 root and the packages built and used in it (make
# check-packaging): a debootstrap and two more builds with Debian's own
# toolchain, 656 s in the host lane of a cold make check after make demo
# (8f4d54f's measurement): CI's (RSVERBS_CHECK_FULL=1), not the newcomer's.
[ "$full" != 1 ] || host_long="$host_long ctest/freshroot.sh ctest/deb.sh"
guest_steps="ctest/vm_suite.sh ctest/vm_siw.sh"
if [ -n "${RSVERBS_CHECK_HOST_STEPS+set}" ]; then host_quick=$RSVERBS_CHECK_HOST_STEPS host_long=""; fi
guest_steps=${RSVERBS_CHECK_GUEST_STEPS-$guest_steps}
export RSVERBS_FRESHROOT_ARCHES=${RSVERBS_FRESHROOT_ARCHES-}
# make check's budget: within 12 minutes after make demo on a fresh 2-core
# machine (docs/testing.md has the measured figures). So, unless
# RSVERBS_CHECK_FULL=1 (which .ci/run sets: CI runs all of it every commit):
#   - conform's fallback modes run the preloaded program only, as the matrix
#     cells do (the relinked one runs the same library code once the ioctl
#     fails; conform.sh CONFORM_FALLBACK_LINKS);
#   - diffrand compares half as many operations a seed (7,500 on the ioctl
#     route, 2,000 on each fallback; still three times a matrix cell's);
#   - the other architectures' builds and unit tests: s390x only, the
#     big-endian one (ctest/crossarch.sh RSVERBS_CROSS_ARCHES; CI builds
#     arm64 and ppc64el too);
#   - the stripped sizes are printed, not held to libibverbs' (CI does).
# An explicit setting of any of these wins.
if [ "$full" != 1 ]; then
  export CONFORM_FALLBACK_LINKS=${CONFORM_FALLBACK_LINKS:-preload}
  export DIFFRAND_OPS=${DIFFRAND_OPS:-7500} DIFFRAND_FALLBACK_OPS=${DIFFRAND_FALLBACK_OPS:-2000}
  export RSVERBS_CROSS_ARCHES=${RSVERBS_CROSS_ARCHES:-s390x}
  # The stripped size against libibverbs' (a release goal, docs/building.md) is
  # printed; CI holds it within ctest/crossarch.sh's allowance (over the bar
  # since c987331, the fabric-join engine's rework: docs/building.md).
  export RSVERBS_SIZE_BAR=${RSVERBS_SIZE_BAR:-0}
fi
# The guest's whole-boot timeout (ctest/vm_suite.sh's 1,500 s) with room
# for the host lane's builds beside it.
export RSVERBS_VM_TIMEOUT=${RSVERBS_VM_TIMEOUT:-3000}
# lane STEP...: runs each step, its time and a FAILED line; the lane's
# status is 1 when any step failed.
lane() {
  local rc=0 t step st before f counted
  for step in "$@"; do
    echo "=== $step"
    t=$(date +%s)
    before=$(cksum "$out"/*.results 2>/dev/null)
    st=0
    "$step" || st=$?
    if [ "$st" != 0 ]; then
      rc=1
      echo "=== $step FAILED (status $st)" >&2
      # No results file with a FAIL line was written while the step ran
      # (by it, or by the other lane: either way the total cannot say 0
      # failed; a file's content, not its time, tells: file times are
      # coarser than a quick step): the step itself is the failure.
      counted=0
      for f in $(grep -l '^FAIL' "$out"/*.results 2>/dev/null); do
        grep -qxF "$(cksum "$f")" <<<"$before" || counted=1
      done
      [ "$counted" = 1 ] ||
        echo "FAIL step $step exited with status $st and wrote no failing result" >> "$out/steps.results"
    fi
    echo "=== $step: $(( $(date +%s) - t )) s"
  done
  return $rc
}
host_lane() {
  local rc=0 t
  # shellcheck disable=SC2086 # the step lists are words
  lane $host_quick || rc=1
  if [ -n "${RSVERBS_CHECK_PREFETCH:-}" ]; then
    echo "=== prefetch: $RSVERBS_CHECK_PREFETCH"
    t=$(date +%s)
    bash -c "$RSVERBS_CHECK_PREFETCH" || { rc=1; echo "=== prefetch FAILED" >&2; }
    echo "=== prefetch: $(( $(date +%s) - t )) s"
  fi
  # shellcheck disable=SC2086
  lane $host_long || rc=1
  echo "=== host lane done in $(( $(date +%s) - start )) s"
  return $rc
}
guest_lane() {
  local rc=0
  # The real-kernel suites but make check-more's (ctest/suites.sh), unless
  # RSVERBS_SUITES names some.
  # shellcheck source=ctest/suites.sh
  . ctest/suites.sh
  export RSVERBS_SKIP_SUITES=${RSVERBS_SKIP_SUITES-$MORE_SUITES_A $MORE_SUITES_B}
  [ -n "${RSVERBS_SUITES:-}" ] || [ -z "$RSVERBS_SKIP_SUITES" ] ||
    echo "=== the real-kernel suites but $RSVERBS_SKIP_SUITES (make check-more runs those)"
  # shellcheck disable=SC2086
  lane $guest_steps || rc=1
  echo "=== guest lane done in $(( $(date +%s) - start )) s"
  return $rc
}
# The host lane, niced, its lines prefixed as they come (sed -u: whole
# lines, so that the two lanes' lines do not mix within one).
host_lane_niced() {
  local st=$out/.host-lane.$$.rc
  { renice -n 19 -p "$BASHPID" >/dev/null; host_lane 2>&1; echo $? > "$st"; } | sed -u 's/^/host| /'
  [ "$(cat "$st" 2>/dev/null)" = 0 ]; local rc=$?
  rm -f "$st"
  return $rc
}
rc=0
if [ "$only" = host ]; then
  host_lane_niced; exit
elif [ "$only" = guest ]; then
  guest_lane; exit
elif [ "${RSVERBS_CHECK_SERIAL:-0}" = 1 ]; then
  host_lane || rc=1
  guest_lane || rc=1
else
  host_lane_niced &
  hpid=$!
  guest_lane || rc=1
  wait "$hpid" || rc=1
fi
echo "=== make check summary ($(( $(date +%s) - start )) s)"
ctest/summary.sh "$out" || rc=1
exit $rc
