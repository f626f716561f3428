#!/usr/bin/env bash
# Runs inside the test bed (testbed/vm.sh): every ctest/vm/*.sh suite in one
# boot, in name order. Each suite sources ctest/lib.sh and writes its
# results to /out, which the host tallies (ctest/summary.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
export RESULTS_DIR=/out RSVERBS_LIB=$PWD/build/librsverbs.so.1 BIN=$PWD/ctest/out/bin
status=0
for s in ctest/vm/*.sh; do
  [ -n "${RSVERBS_SUITES:-}" ] && ! grep -qw "$(basename "$s" .sh)" <<< "$RSVERBS_SUITES" && continue
  echo "=== suite $(basename "$s" .sh)"
  start=$(date +%s)
  bash "$s" || status=1
  echo "=== suite $(basename "$s" .sh) done in $(( $(date +%s) - start )) s"
done
exit $status
