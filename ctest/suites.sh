# shellcheck shell=bash
# The real-kernel suites (ctest/vm/*.sh) that make check leaves to make
# check-more, sourced by ctest/check.sh, ctest/more.sh and
# ctest/ci_cells.sh: the slowest under TCG among those that prove a feature
# beside the five verbs' conformance (the trace and its hints, the IP join
# and the SA membership, GID selection and the rsverbs command, device loss,
# the sanitizers' runs and the stress), in two groups of about the same
# guest time (about 360 and 450 s cold on 2 cores at b56f9cc), which CI runs
# on alternate commits. Every other suite, a new one included, runs in make
# check.
MORE_SUITES_A="devloss ipjoin member trace"
MORE_SUITES_B="robust_san select stress tool"
