#!/usr/bin/env bash
# Smoke run of the `make bench` code with tiny N, for make check. Meant to be
# installed as ctest/vm/zz_bench_smoke.sh (a symlink or a copy), run in the
# guest by ctest/guest_suite.sh from the repository root. Nothing here is
# timed and no time is compared. It checks that bench/bench.c runs as every
# contender (rdma-core, rsverbs relinked, rsverbs preloaded, the bare-ioctl
# floor, a second rdma-core) in one token-ring round as make bench runs them,
# that every call gives the expected answer (bench checks each result), that
# `bench report` pools the samples, and -- counted live with strace, rdma-core
# alongside as the reference -- that each verb costs exactly one system call
# per call in the steady state.
# The steady state it counts is the untraced path's (one syscall per call):
# with RSVERBS_TRACE on, the trace's own reads and writes are expected, so
# an inherited RSVERBS_TRACE (RSVERBS_TRACE_ALL) is unset here.
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
unset RSVERBS_TRACE
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
LIB=${RSVERBS_LIB:-$ROOT/build/librsverbs.so.1}
W=$(mktemp -d)
DEV=rxe0 TMO=120 PIN=()
LATENCY=(rdma-core relinked preloaded floor rdma-core-AA)
start=$SECONDS

# The bench programs: bench/out (bench/build.sh on the host), rebuilt here
# into $W when missing or older than their sources.
BIN=$ROOT/bench/out
if ! { [ "$BIN/bench" -nt "$ROOT/bench/bench.c" ] && [ "$BIN/bench.rsv" -nt "$ROOT/bench/bench.c" ] &&
       [ "$BIN/bench.rsv" -nt "$LIB" ]; }; then
  echo "bench-smoke: bench/out is missing or stale; compiling in the guest"
  BIN=$W/bin
  mkdir -p "$BIN"
  # shellcheck disable=SC2046
  if timeout 300 cc -O2 -D_GNU_SOURCE -I"$ROOT/include" -o "$BIN/bench" "$ROOT/bench/bench.c" -libverbs -ldl -lm &&
     timeout 300 cc -O2 -D_GNU_SOURCE -I"$ROOT/include" -o "$BIN/bench.rsv" "$ROOT/bench/bench.c" \
       $(PKG_CONFIG_PATH=$ROOT/build/pkgconfig pkg-config --cflags --libs rsverbs) -Wl,-rpath,"$(dirname "$LIB")" -ldl -lm; then
    pass "bench programs compiled"
  else
    fail "bench programs do not compile"
    finish
    exit
  fi
fi
# shellcheck source=bench/common.sh
source "$ROOT/bench/common.sh"

# One ring round. Per contender: (a)-(c) 2 blocks of 5 calls, (d) 1 scan,
# (e) N=1: 8 cycles in 2 blocks, N=4: 4 cycles (the minimum) in 2 blocks;
# attach and detach samples: 30 + 1 + 16 + 32 = 79.
if ring_round 1 -k 5 -b 2 -s 1 -n 1,4 -e 8 2> "$W/ring.err"; then
  pass "ring round of ${#LATENCY[@]} contenders: every call answered as expected, each served by the expected library"
  for c in "${LATENCY[@]}"; do
    n=$(grep -vc '^#' "$W/$c.1")
    if [ "$n" -eq 79 ]; then pass "bench time as $c: 79 samples"; else fail "bench time as $c: $n samples, expected 79"; fi
  done
  if timeout 60 "$BIN/bench" report "$W" 1 "${LATENCY[@]}" > "$W/report.md" 2> "$W/report.err"; then
    # 8 operations: a row each in table 1, five rows each in table 2 (the
    # first one names the operation).
    named=$(grep -c '^| (' "$W/report.md")
    others=$(grep -cE '^\|  \| (relinked|preloaded|floor|rdma-core-AA) \|' "$W/report.md")
    if [ "$named" -eq 16 ] && [ "$others" -eq 32 ]; then
      pass "bench report: both tables, 8 operations, ${#LATENCY[@]} contenders"
    else
      fail "bench report: $named/$others rows, expected 16/32"
      cat "$W/report.md" >&2
    fi
  else
    fail "bench report exited with an error: $(cat "$W/report.err")"
  fi
else
  fail "ring round: $(tail -n 3 "$W/ring.err" | tr '\n' ' ')"
fi

# System calls per call, counted with strace; rdma-core is counted too, as
# the live reference (it must show 1 as well, or the counting is wrong).
K=5
for c in rdma-core relinked preloaded; do
  pre=() prog=("$BIN/bench")
  [ "$c" = relinked ] && prog=("$BIN/bench.rsv")
  [ "$c" = preloaded ] && pre=(-E "LD_PRELOAD=$LIB")
  if ! timeout 300 strace -f -qq "${pre[@]}" -o "$W/strace.$c" "${prog[@]}" count -k "$K" > /dev/null 2> "$W/$c.count.err"; then
    fail "bench count under strace as $c: $(tail -3 "$W/$c.count.err" | tr '\n' ' ')"
    continue
  fi
  check "bench count as $c: served by the expected library" served_ok "$c" "$W/$c.count.err"
  awk -f "$ROOT/bench/strace_regions.awk" "$W/strace.$c" > "$W/regions.$c"
  for spec in "b steady:$K" "a steady:$((2 * K))" "c steady:$K"; do
    label=${spec%%:*} calls=${spec#*:}
    got=$(awk -F'\t' -v l="$label" '$1 == l { print $2 }' "$W/regions.$c")
    if [ "$got" = "$calls" ]; then
      pass "$c: $label: $calls system calls for $calls calls"
    else
      fail "$c: $label: ${got:-no} system calls for $calls calls ($(awk -F'\t' -v l="$label" '$1 == l { print $3 }' "$W/regions.$c"))"
    fi
  done
  # rsverbs' steady attach/detach is the 32-byte write() (docs/write-path.md).
  if [ "$c" != rdma-core ]; then
    detail=$(awk -F'\t' '$1 == "a steady" { print $3 }' "$W/regions.$c")
    check "$c: a steady: every call is a write() of 32 bytes ($detail)" [ "$detail" = "$((2 * K))× write → 32" ]
  fi
  echo "bench-smoke: $c: first call of the process: $(awk -F'\t' '$1 == "b first-call ctx1" { print $2 " system calls (" $3 ")" }' "$W/regions.$c")"
done
mkdir -p "$RESULTS_DIR/bench-smoke" && cp "$W"/*.log "$W"/*.err "$W"/report.md "$W"/regions.* "$RESULTS_DIR/bench-smoke/" 2> /dev/null
rm -rf "$W"
echo "bench-smoke: done in $((SECONDS - start)) s"
finish
