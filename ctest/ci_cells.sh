#!/usr/bin/env bash
# What CI runs for this commit (.ci/run), deterministic from the commit
# count n (git rev-list --count HEAD; RSVERBS_CI_N overrides): make check
# and fanout N = 2 on every commit, and one slot of six (n mod 6) of the
# long steps, so that six consecutive commits run every matrix cell, every
# architecture, both halves of the traced suites and, every other commit,
# make faults, and every commit's .ci/run stays under 45 minutes cold on 2
# cores. The slots are balanced by the guest time each step took (README's
# matrix table; traced halves and faults about 300 to 450 s each):
#   slot  matrix cells                                   traced  faults  fanout
#   0     s390x (856 s), trixie:trixie (111)              -       -       2
#   1     bullseye:sid (556), bookworm:bookworm-backports (100) - yes     2
#   2     ppc64el (435)                                   first   -       2 24
#   3     sid:sid (444), sid:bullseye (171)               -       yes     2
#   4     arm64 (559)                                     -       yes     2
#   5     bullseye:bullseye (407)                         second  -       2
# bookworm:bookworm is never among them: make check's own boot is that
# cell (the same kernel, userland and library), with every suite the
# matrix runs there, siw included, and diffrand's larger counts. The
# architecture of the slot's architecture cell (arm64 where there is none)
# is also the one the fresh Debian 12 root builds from nothing (make ARCH=)
# and whose packages make check-deb-arch installs in its userland.
# The traced suites come in two halves of about the same time (the
# slowest two traced, stress and diffrand, in different ones): the first
# named here, the second every other suite in ctest/vm/ that make
# check-traced runs (ctest/guest_suite.sh leaves out faults, trace,
# zz_bench_smoke, select, tool, nomem and stack when traced), so that a new
# suite is traced too; each half with the smoke suite.
#   ctest/ci_cells.sh          the cells, as RSVERBS_MATRIX_CELLS takes them
#   ctest/ci_cells.sh --plan   n, then "slot=", "cells=", "traced="
#                              (RSVERBS_SUITES; empty: none), "faults=" (1
#                              or 0), "fanout=" (FANOUT_NS) and "arch="
#                              (empty: no architecture cell) lines
set -euo pipefail
cd "$(dirname "$0")/.."
n=${RSVERBS_CI_N:-$(git rev-list --count HEAD 2>/dev/null || echo 0)}
first="00_smoke conform diffrand e2e hostile rust writepath"
second=00_smoke
for s in ctest/vm/*.sh; do
  s=$(basename "$s" .sh)
  grep -qw "$s" <<<"$first faults trace zz_bench_smoke select tool nomem stack" || second="$second $s"
done
slot=$((n % 6))
case $slot in
  0) cells="bookworm:bookworm:s390x trixie:trixie" traced="" faults=0 fanout="2" ;;
  1) cells="bullseye:sid bookworm:bookworm-backports" traced="" faults=1 fanout="2" ;;
  2) cells="bookworm:bookworm:ppc64el" traced=$first faults=0 fanout="2 24" ;;
  3) cells="sid:sid sid:bullseye" traced="" faults=1 fanout="2" ;;
  4) cells="bookworm:bookworm:arm64" traced="" faults=1 fanout="2" ;;
  5) cells="bullseye:bullseye" traced=$second faults=0 fanout="2" ;;
esac
arch=""
for c in $cells; do
  IFS=: read -r _ _ a <<<"$c"
  [ -z "${a:-}" ] || arch=$a
done
if [ "${1:-}" = --plan ]; then
  echo "n=$n"
  echo "slot=$slot"
  echo "cells=$cells"
  echo "traced=$traced"
  echo "faults=$faults"
  echo "fanout=$fanout"
  echo "arch=$arch"
else
  echo "$cells"
fi
