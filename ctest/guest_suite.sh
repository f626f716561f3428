#!/usr/bin/env bash
# Runs inside the test bed (testbed/vm.sh): every ctest/vm/*.sh suite in one
# boot, in name order. Each suite sources ctest/lib.sh and writes its
# results to /out, which the host tallies (ctest/summary.sh).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# The test programs of this userland and architecture (ctest/build.sh) and
# the library of this architecture, as ctest/vm_suite.sh names them: the
# host's (bookworm) in ctest/out/bin and build/, the others' in
# ctest/out/USERLAND[-ARCH]/bin and build-ARCH.
BIN=$PWD/${RSVERBS_GUEST_BIN:-ctest/out/bin}
export RESULTS_DIR=/out RSVERBS_LIB=$PWD/${RSVERBS_GUEST_BUILD:-build}/librsverbs.so.1 BIN
echo "=== guest: kernel $(uname -r) (${RSVERBS_KERNEL:-bookworm}, $(uname -m)), userland ${RSVERBS_USERLAND:-bookworm}" \
  "(glibc $(getconf GNU_LIBC_VERSION | cut -d' ' -f2), rdma-core $(dpkg-query -W -f='${Version}' libibverbs1 libibverbs1t64 2>/dev/null | head -1)), BIN=$BIN"
# RSVERBS_TRACE_ALL: every suite runs with RSVERBS_TRACE set to it (a
# suite that sets RSVERBS_TRACE itself still does). A file name without a
# slash (hints:NAME, NAME) is a file in the guest's tmpfs /tmp: tracing all
# suites writes hundreds of thousands of lines (docs/trace.md), too slow over
# 9p to /out; its line counts by verb and hint go to /out/NAME.counts at the end.
TRACE_FILE=""
if [ -n "${RSVERBS_TRACE_ALL:-}" ]; then
  case $RSVERBS_TRACE_ALL in
    1 | hints | /* | hints:/*) RSVERBS_TRACE=$RSVERBS_TRACE_ALL ;;
    hints:*) TRACE_FILE=/tmp/${RSVERBS_TRACE_ALL#hints:} RSVERBS_TRACE=hints:$TRACE_FILE ;;
    *) TRACE_FILE=/tmp/$RSVERBS_TRACE_ALL RSVERBS_TRACE=$TRACE_FILE ;;
  esac
  # Traced, the long suites do fewer calls (an explicit count still wins):
  # diffrand the matrix cells' 2,500 ioctl and 1,000 fallback operations a
  # seed (117 s traced at 2608a83 with make check's 15,000 and 4,000), and
  # stress 2,500 calls a thread, where each traced call writes its line
  # under the sink's lock (80,000 calls took 31 s relinked against 0.7 s for
  # rdma-core alone); still 20,000 contending calls a mode.
  DIFFRAND_OPS=${DIFFRAND_OPS:-2500} DIFFRAND_FALLBACK_OPS=${DIFFRAND_FALLBACK_OPS:-1000}
  STRESS_ITERS=${STRESS_ITERS:-2500}
  export RSVERBS_TRACE DIFFRAND_OPS DIFFRAND_FALLBACK_OPS STRESS_ITERS
  echo "=== every suite with RSVERBS_TRACE=$RSVERBS_TRACE (DIFFRAND_OPS=$DIFFRAND_OPS, STRESS_ITERS=$STRESS_ITERS)"
fi
# Opt-in suites run only when RSVERBS_SUITES names them: faults (make
# faults, its own step in .ci/run: it forks hundreds of programs), and sib,
# sibfaults and sibswitch (the software InfiniBand HCA, testbed/sib/: need
# RSVERBS_SIB=1 on the host; make check-sib runs them).
OPT_IN="faults sib sibfaults sibswitch"
# Not again in make check-traced: trace sets RSVERBS_TRACE itself, per run,
# and compares its calls with tracing off and on; zz_bench_smoke's figures
# are not results; select and tool test code that the trace never sees
# (the GID selectors and the command call the GID engine directly, not
# through an export's hooks: src/capi/select.rs, src/tool), and the traced
# verbs that select's programs make through rdma_cm and perftest are
# compat's too. (The safe Rust API goes through the exports: rust runs.)
# nomem sets its features itself, and its plain runs must have none (it
# counts the library's allocations there: tracing would make some); so does
# stack (its traced runs name their own trace file, its plain runs none).
[ -z "${RSVERBS_TRACE_ALL:-}" ] || OPT_IN="$OPT_IN trace zz_bench_smoke select tool nomem stack"
status=0
# RSVERBS_SKIP_SUITES: left out when RSVERBS_SUITES names none (make check
# leaves make check-more's: ctest/suites.sh).
for s in ctest/vm/*.sh; do
  if [ -n "${RSVERBS_SUITES:-}" ]; then
    grep -qw "$(basename "$s" .sh)" <<< "$RSVERBS_SUITES" || continue
  elif grep -qw "$(basename "$s" .sh)" <<< "$OPT_IN ${RSVERBS_SKIP_SUITES:-}"; then
    continue
  fi
  echo "=== suite $(basename "$s" .sh)"
  start=$(date +%s)
  bash "$s" || status=1
  echo "=== suite $(basename "$s" .sh) done in $(( $(date +%s) - start )) s"
done
if [ -n "$TRACE_FILE" ]; then
  {
    echo "lines $(wc -l < "$TRACE_FILE" 2> /dev/null || echo 0)"
    awk '{ print $2 }' "$TRACE_FILE" 2> /dev/null | sort | uniq -c | sort -rn
  } > "/out/$(basename "$TRACE_FILE").counts"
  echo "=== trace: $(head -1 "/out/$(basename "$TRACE_FILE").counts") in $TRACE_FILE (counts in /out/$(basename "$TRACE_FILE").counts)"
fi
exit $status
