#!/usr/bin/env bash
# The matrix cells CI runs (.ci/run): the whole matrix (its time in README.md,
# each cell's in testbed/README.md; the two Linux 7.x cells are the slowest)
# is too long beside make check, check-traced and fanout within CI's time.
# So CI runs
#   - bullseye:bullseye  rdma-core 33 and Linux 5.10: the glibc floor of the
#                        one library file, and rdma-core 33's env parse;
#   - one of the other five amd64 cells, rotating with the commit count, so
#     that five consecutive commits cover the whole matrix; bookworm:bookworm
#     is not among them: make check's own boot is that cell (the same
#     kernel, userland and library), with every suite the matrix runs
#     there, siw included, and diffrand's larger counts (290 s saved);
#   - one bookworm cell of another architecture (make matrix-arch,
#     docs/architectures.md), rotating the same way over s390x, arm64
#     and ppc64el.
# Prints the cells as RSVERBS_MATRIX_CELLS takes them.
set -euo pipefail
cd "$(dirname "$0")/.."
others=(bookworm:bookworm-backports trixie:trixie sid:sid sid:bullseye bullseye:sid)
n=$(git rev-list --count HEAD 2>/dev/null || echo 0)
arches=(s390x arm64 ppc64el)
echo "bullseye:bullseye ${others[$((n % ${#others[@]}))]} bookworm:bookworm:${arches[$((n % ${#arches[@]}))]}"
