#!/usr/bin/env bash
# make check: every suite, in order, continuing past failures; closes with
# the total "N passed, N failed" line and fails if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
mkdir -p ctest/out
rm -f ctest/out/*.results
start=$(date +%s)
rc=0
for step in ctest/unit.sh ctest/crate.sh ctest/header_fresh.sh ctest/abi.sh ctest/crossarch.sh ctest/unload.sh ctest/unwind.sh ctest/sanitize.sh ctest/install.sh ctest/freshroot.sh ctest/deb.sh ctest/vm_suite.sh ctest/vm_siw.sh; do
  echo "=== $step"
  t=$(date +%s)
  "$step" || { rc=1; echo "=== $step FAILED" >&2; }
  echo "=== $step: $(( $(date +%s) - t )) s"
done
echo "=== make check summary ($(( $(date +%s) - start )) s)"
ctest/summary.sh || rc=1
exit $rc
