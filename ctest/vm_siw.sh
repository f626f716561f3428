#!/usr/bin/env bash
# make check's second boot: siw (Soft-iWARP, a provider without a multicast
# op; ctest/vm/siw.sh) on bookworm's kernel, loaded with RSVERBS_SIW=1
# (testbed/siw.sh builds siw.ko for it). A boot of its own, as make matrix
# does for the cells whose kernel cannot build siw.ko: the main boot keeps
# the devices that every other suite expects. Its results join make check's
# tally (ctest/out/siw.results), so that make check is the whole
# bookworm:bookworm cell of the matrix and CI need not boot that cell again
# (ctest/ci_cells.sh).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=$PWD/ctest/out/siw-boot
rc=0
RSVERBS_SIW=1 RSVERBS_SUITES=siw RSVERBS_VM_OUT=$out RSVERBS_VM_TIMEOUT=600 ctest/vm_suite.sh || rc=$?
cp "$out/siw.results" ctest/out/ 2>/dev/null || { echo "vm_siw: no siw results in $out" >&2; rc=1; }
exit $rc
