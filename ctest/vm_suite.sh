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
# directory (then nothing is copied to ctest/out).
set -euo pipefail
cd "$(dirname "$0")/.."
K=${RSVERBS_KERNEL:-bookworm} U=${RSVERBS_USERLAND:-bookworm}
ctest/build.sh
bench/build.sh
if [ -n "${RSVERBS_VM_OUT:-}" ]; then
  out=$RSVERBS_VM_OUT tally=0
elif [ "$K/$U" = bookworm/bookworm ]; then
  out=$PWD/ctest/out/vm tally=1
else
  out=$PWD/ctest/out/cell/$U-$K tally=0
fi
mkdir -p "$out"
out=$(cd "$out" && pwd -P)
rm -f "$out"/*.results
rc=0
mem=1024
[ -z "${RSVERBS_TRACE_ALL:-}" ] || mem=2048
testbed/vm.sh run --timeout "${RSVERBS_VM_TIMEOUT:-1500}" --mem "$mem" --out "$out" \
  -- env RSVERBS_SUITES="${RSVERBS_SUITES:-}" DIFFRAND_OPS="${DIFFRAND_OPS:-}" \
  DIFFRAND_FALLBACK_OPS="${DIFFRAND_FALLBACK_OPS:-}" DIFFRAND_TIMEOUT="${DIFFRAND_TIMEOUT:-}" \
  COMPAT_TIMEOUT="${COMPAT_TIMEOUT:-}" RSVERBS_TRACE_ALL="${RSVERBS_TRACE_ALL:-}" ctest/guest_suite.sh || rc=$?
if [ $tally = 1 ]; then cp "$out"/*.results ctest/out/ 2>/dev/null || true; fi
[ "$rc" -eq 0 ] || echo "vm_suite: guest suite exited with $rc ($U userland, $K kernel; results in $out)" >&2
exit "$rc"
