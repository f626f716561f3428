# shellcheck shell=bash
# The real-kernel suites (ctest/vm/*.sh) that make check leaves to make
# check-more, sourced by ctest/check.sh and ctest/more.sh (ctest/ci_cells.sh
# picks a group a commit): the slowest under TCG among those that prove a feature
# beside the five verbs' conformance (the trace and its hints, the IP join
# and the SA membership, GID selection and the rsverbs command, device loss,
# the sanitizers' runs and the stress), in two groups of about the same
# guest time (a 353 s at a46a01c, b 339 s at 24570fe, each a boot of its
# own in .ci/run from empty caches on 2 cores), which CI runs
# on alternate commits. Every other suite, a new one included, runs in make
# check.
# shellcheck disable=SC2034 # read by the scripts that source this file
MORE_SUITES_A="devloss ipjoin member trace"
# shellcheck disable=SC2034
MORE_SUITES_B="robust_san select stress tool"
