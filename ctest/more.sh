#!/usr/bin/env bash
# make check-more: the real-kernel suites make check leaves out
# (ctest/suites.sh), in one boot of make check's cell; RSVERBS_MORE=a or b
# runs one group (.ci/run: one a commit). Results in ctest/out/more; the
# last line is their total.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=ctest/suites.sh
. ctest/suites.sh
case ${RSVERBS_MORE:-all} in
  a) suites=$MORE_SUITES_A ;;
  b) suites=$MORE_SUITES_B ;;
  all) suites="$MORE_SUITES_A $MORE_SUITES_B" ;;
  *) echo "more: RSVERBS_MORE=${RSVERBS_MORE}: a, b or all" >&2; exit 2 ;;
esac
out=$PWD/ctest/out/more
rm -f "$out"/*.results
echo "more: suites $suites"
RSVERBS_SUITES=$suites RSVERBS_VM_OUT=$out ctest/vm_suite.sh; st=$?
ctest/summary.sh "$out" || st=1
exit $st
