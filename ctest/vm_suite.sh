#!/usr/bin/env bash
# Host side of the real-kernel tests: build the guest programs, boot the
# Soft-RoCE test bed once, run ctest/guest_suite.sh in it, tally the results.
# RSVERBS_SUITES="conform e2e" runs only those suites.
set -euo pipefail
cd "$(dirname "$0")/.."
ctest/build.sh
bench/build.sh
mkdir -p ctest/out/vm
rm -f ctest/out/vm/*.results
rc=0
testbed/vm.sh run --timeout "${RSVERBS_VM_TIMEOUT:-1500}" --out "$PWD/ctest/out/vm" \
  -- env RSVERBS_SUITES="${RSVERBS_SUITES:-}" ctest/guest_suite.sh || rc=$?
cp ctest/out/vm/*.results ctest/out/ 2>/dev/null || true
[ "$rc" -eq 0 ] || echo "vm_suite: guest suite exited with $rc" >&2
exit "$rc"
