#!/usr/bin/env bash
# What CI runs for this commit (.ci/run), deterministic from the commit
# count n (git rev-list --count HEAD): the long steps rotate, so that a
# short run of consecutive commits covers everything, and every commit's
# .ci/run stays under 45 minutes cold on 2 cores with room for new suites.
#   - the matrix: two cells. One amd64 cell, rotating over the six that
#     are not bookworm:bookworm (n mod 6): bullseye:bullseye (rdma-core 33,
#     Linux 5.10: the glibc floor of the one library file and rdma-core
#     33's env parse), bookworm:bookworm-backports, trixie:trixie, sid:sid,
#     sid:bullseye, bullseye:sid. bookworm:bookworm is never among them:
#     make check's own boot is that cell (the same kernel, userland and
#     library), with every suite the matrix runs there, siw included, and
#     diffrand's larger counts. And one bookworm cell of another
#     architecture (make matrix-arch, docs/architectures.md), rotating
#     over s390x, arm64 and ppc64el (n mod 3). Six consecutive commits run
#     every amd64 cell, three every architecture.
#   - make check-traced: one half of the traced suites (n mod 2), each half
#     with the smoke suite; two consecutive commits trace every suite.
#   - make fanout: N = 2 on every commit, N = 24 as well when n mod 3 = 2,
#     with ppc64el, the quickest architecture cell (24 receivers run every scenario that 8 do; make fanout alone runs
#     2, 8 and 24).
#   ctest/ci_cells.sh          the cells, as RSVERBS_MATRIX_CELLS takes them
#   ctest/ci_cells.sh --plan   n, then "cells=", "traced=" (RSVERBS_SUITES)
#                              and "fanout=" (FANOUT_NS) lines
set -euo pipefail
cd "$(dirname "$0")/.."
n=${RSVERBS_CI_N:-$(git rev-list --count HEAD 2>/dev/null || echo 0)}
amd64=(bullseye:bullseye bookworm:bookworm-backports trixie:trixie sid:sid sid:bullseye bullseye:sid)
arches=(s390x arm64 ppc64el)
cells="${amd64[$((n % ${#amd64[@]}))]} bookworm:bookworm:${arches[$((n % ${#arches[@]}))]}"
# The traced suites, in two halves of about the same time (the slowest two
# traced, stress and diffrand, in different ones): the first named here,
# the second every other suite in ctest/vm/ that make check-traced runs
# (ctest/guest_suite.sh leaves out faults, trace, zz_bench_smoke, select,
# tool, nomem and stack when traced), so that a new suite is traced too; each half
# with the smoke suite.
first="00_smoke conform diffrand e2e hostile rust writepath"
second=00_smoke
for s in ctest/vm/*.sh; do
  s=$(basename "$s" .sh)
  grep -qw "$s" <<<"$first faults trace zz_bench_smoke select tool nomem stack" || second="$second $s"
done
traced=("$first" "$second")
fanout="2"
[ $((n % 3)) != 2 ] || fanout="2 24"
if [ "${1:-}" = --plan ]; then
  echo "n=$n"
  echo "cells=$cells"
  echo "traced=${traced[$((n % 2))]}"
  echo "fanout=$fanout"
else
  echo "$cells"
fi
