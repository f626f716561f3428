#!/usr/bin/env bash
# Runs inside the test bed (testbed/vm.sh): every ctest/vm/*.sh suite in one
# boot, in name order. Each suite sources ctest/lib.sh and writes its
# results to /out, which the host tallies (ctest/summary.sh).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# The test programs of this userland (ctest/build.sh): the host's (bookworm)
# in ctest/out/bin, the others' in ctest/out/USERLAND/bin.
BIN=$PWD/ctest/out/bin
[ "${RSVERBS_USERLAND:-bookworm}" = bookworm ] || BIN=$PWD/ctest/out/$RSVERBS_USERLAND/bin
export RESULTS_DIR=/out RSVERBS_LIB=$PWD/build/librsverbs.so.1 BIN
echo "=== guest: kernel $(uname -r) (${RSVERBS_KERNEL:-bookworm}), userland ${RSVERBS_USERLAND:-bookworm}" \
  "(glibc $(getconf GNU_LIBC_VERSION | cut -d' ' -f2), rdma-core $(dpkg-query -W -f='${Version}' libibverbs1 libibverbs1t64 2>/dev/null | head -1)), BIN=$BIN"
status=0
for s in ctest/vm/*.sh; do
  [ -n "${RSVERBS_SUITES:-}" ] && ! grep -qw "$(basename "$s" .sh)" <<< "$RSVERBS_SUITES" && continue
  echo "=== suite $(basename "$s" .sh)"
  start=$(date +%s)
  bash "$s" || status=1
  echo "=== suite $(basename "$s" .sh) done in $(( $(date +%s) - start )) s"
done
exit $status
