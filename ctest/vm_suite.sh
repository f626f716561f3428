#!/usr/bin/env bash
# Host side of the real-kernel tests: build the guest programs, boot the
# Soft-RoCE test bed once, run ctest/guest_suite.sh in it, tally the results.
# RSVERBS_SUITES="conform e2e" runs only those suites.
# RSVERBS_TRACE_ALL=hints:NAME (or any RSVERBS_TRACE value) runs every suite
# with RSVERBS_TRACE set to it (docs/trace.md); a NAME without a slash is a
# file in the guest's /tmp (ctest/guest_suite.sh), so the guest gets 2 GB.
# RSVERBS_KERNEL / RSVERBS_USERLAND pick the cell (testbed/README.md); the
# default cell (bookworm/bookworm) writes to ctest/out/vm and copies the
# results to ctest/out (make check's tally), any other cell to
# ctest/out/cell/USERLAND-KERNEL only.  RSVERBS_VM_OUT overrides the
# directory (then nothing is copied to ctest/out).  RSVERBS_ARCH=arm64|
# ppc64el|s390x boots that architecture (testbed/arch.sh): the library is
# cross-built into build-ARCH (make lib ARCH=arm64: build-arm64) and the
# test programs in its userland.
set -euo pipefail
cd "$(dirname "$0")/.."
K=${RSVERBS_KERNEL:-bookworm} U=${RSVERBS_USERLAND:-bookworm}
# shellcheck source=testbed/arch.sh
. testbed/arch.sh
# What the guest runs: the library and the test programs of its architecture
# (ctest/build.sh builds another architecture's library first).
ctest/build.sh
# The benchmark programs are the host's (its smoke suite is not run elsewhere).
[ "$ARCH_FOREIGN" = 1 ] || bench/build.sh
if [ -n "${RSVERBS_VM_OUT:-}" ]; then
  out=$RSVERBS_VM_OUT tally=0
elif [ "$K/$U/$ARCH_FOREIGN" = bookworm/bookworm/0 ]; then
  out=$PWD/ctest/out/vm tally=1
else
  out=$PWD/ctest/out/cell/$U-$K tally=0
  [ "$ARCH_FOREIGN" = 0 ] || out=$PWD/ctest/out/cell/$U-$K-$ARCH_DEB
fi
mkdir -p "$out"
out=$(cd "$out" && pwd -P)
rm -f "$out"/*.results
rc=0
mem=1024
[ -z "${RSVERBS_TRACE_ALL:-}" ] || mem=2048
testbed/vm.sh run --timeout "${RSVERBS_VM_TIMEOUT:-1500}" --mem "$mem" --out "$out" \
  -- env RSVERBS_SUITES="${RSVERBS_SUITES:-}" RSVERBS_SKIP_SUITES="${RSVERBS_SKIP_SUITES:-}" DIFFRAND_OPS="${DIFFRAND_OPS:-}" \
  DIFFRAND_FALLBACK_OPS="${DIFFRAND_FALLBACK_OPS:-}" DIFFRAND_TIMEOUT="${DIFFRAND_TIMEOUT:-}" \
  COMPAT_TIMEOUT="${COMPAT_TIMEOUT:-}" CONFORM_FALLBACK_LINKS="${CONFORM_FALLBACK_LINKS:-}" CONFORM_DEVS="${CONFORM_DEVS:-}" DIFFRAND_DEVS="${DIFFRAND_DEVS:-}" FAULTS_AXES="${FAULTS_AXES:-}" FAULTS_PATHS="${FAULTS_PATHS:-}" FAULTS_CANCEL="${FAULTS_CANCEL:-}" RSVERBS_TRACE_ALL="${RSVERBS_TRACE_ALL:-}" \
  RSVERBS_GUEST_BUILD="$ARCH_BUILD" RSVERBS_GUEST_BIN="$(arch_test_bin "$U")" ctest/guest_suite.sh || rc=$?
if [ $tally = 1 ]; then cp "$out"/*.results ctest/out/ 2>/dev/null || true; fi
[ "$rc" -eq 0 ] || echo "vm_suite: guest suite exited with $rc ($U userland, $K kernel, $ARCH_DEB; results in $out)" >&2
exit "$rc"
