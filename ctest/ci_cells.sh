#!/usr/bin/env bash
# What CI runs for this commit (.ci/run), deterministic from the commit
# count n (git rev-list --count HEAD; RSVERBS_CI_N overrides): make check
# on every commit, and one slot of twelve (n mod 12) of the long steps, so
# that twelve consecutive commits run every matrix cell, every
# architecture twice, both halves of the traced suites twice, make faults
# four times and fanout, and every commit's .ci/run stays under 45 minutes
# cold on 2 cores: the guest lane (make check's real-kernel suites, one
# group of make check-more's on alternate commits, then the slot's guests,
# one after another) is the long pole, so a slot gets 700 to 1,000 s of
# guest time (slot 5 measured: 959 s, the whole run 2,117).
# The slots are balanced by the time each step took: the cells measured
# cold in .ci/run (s390x 699 s at a46a01c, bullseye:bullseye 561 at 24570fe,
# each cell's conform then without its relinked fallback runs), the others
# estimated from README's matrix table less that cut; a traced half about
# 400 s (398 at 24570fe), make faults 300, fanout N = 2 150, N = 2 and 24 300:
#   slot  matrix cells                                   traced  faults  fanout
#   0     s390x (699 s)                                   -       -       -
#   1     bullseye:sid (520), bookworm:bookworm-backports (90) - -        2
#   2     ppc64el (390)                                   first   -       -
#   3     sid:sid (410)                                   -       yes     -
#   4     arm64 (500), sid:bullseye (160)                 -       -       -
#   5     bullseye:bullseye (561)                         second  -       -
#   6     s390x                                           -       -       -
#   7     trixie:trixie (100)                             -       yes     2 24
#   8     ppc64el                                         -       yes     -
#   9     arm64                                           -       -       2
#   10    -                                               second  yes     -
#   11    sid:bullseye                                    first   -       2
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
#   ctest/ci_cells.sh --plan   n, then "slot=", "cells=" (empty: none),
#                              "traced=" (RSVERBS_SUITES; empty: none),
#                              "faults=" (1 or 0), "fanout=" (FANOUT_NS;
#                              empty: none), "arch=" (empty: no
#                              architecture cell) and "more=" (make
#                              check-more's group, a or b: RSVERBS_MORE) lines
set -euo pipefail
cd "$(dirname "$0")/.."
n=${RSVERBS_CI_N:-$(git rev-list --count HEAD 2>/dev/null || echo 0)}
first="00_smoke conform diffrand e2e hostile rust writepath"
second=00_smoke
for s in ctest/vm/*.sh; do
  s=$(basename "$s" .sh)
  grep -qw "$s" <<<"$first faults trace zz_bench_smoke select tool nomem stack" || second="$second $s"
done
slot=$((n % 12))
case $slot in
  0) cells="bookworm:bookworm:s390x" traced="" faults=0 fanout="" ;;
  1) cells="bullseye:sid bookworm:bookworm-backports" traced="" faults=0 fanout="2" ;;
  2) cells="bookworm:bookworm:ppc64el" traced=$first faults=0 fanout="" ;;
  3) cells="sid:sid" traced="" faults=1 fanout="" ;;
  4) cells="bookworm:bookworm:arm64 sid:bullseye" traced="" faults=0 fanout="" ;;
  5) cells="bullseye:bullseye" traced=$second faults=0 fanout="" ;;
  6) cells="bookworm:bookworm:s390x" traced="" faults=0 fanout="" ;;
  7) cells="trixie:trixie" traced="" faults=1 fanout="2 24" ;;
  8) cells="bookworm:bookworm:ppc64el" traced="" faults=1 fanout="" ;;
  9) cells="bookworm:bookworm:arm64" traced="" faults=0 fanout="2" ;;
  10) cells="" traced=$second faults=1 fanout="" ;;
  11) cells="sid:bullseye" traced=$first faults=0 fanout="2" ;;
esac
arch=""
for c in $cells; do
  IFS=: read -r _ _ a <<<"$c"
  [ -z "${a:-}" ] || arch=$a
done
# make check-more's groups (ctest/suites.sh) on alternate commits.
more=a
[ $((n % 2)) = 0 ] || more=b
if [ "${1:-}" = --plan ]; then
  echo "n=$n"
  echo "slot=$slot"
  echo "cells=$cells"
  echo "traced=$traced"
  echo "faults=$faults"
  echo "fanout=$fanout"
  echo "arch=$arch"
  echo "more=$more"
else
  echo "$cells"
fi
