#!/usr/bin/env bash
# A provider without a multicast op, in the guest: siw0 (Soft-iWARP, built
# out of tree by testbed/siw.sh, loaded when RSVERBS_SIW=1). rdma-core's
# dummy op (libibverbs/dummy_ops.c) answers EOPNOTSUPP with no system call
# and errno untouched; rsverbs must answer the same (src/rdma_core/provider.rs).
# noop.c runs as (a) rdma-core, (b) relinked, (c) preloaded, each under
# strace: identical lines, and no system call between its markers. Then
# `rsverbs selftest siw0`: every case identical (docs/selftest.md).
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
W=$(mktemp -d)
DEV=siw0
AWK=$(cd "$(dirname "$0")/../.." && pwd)/bench/strace_regions.awk

if [ "${RSVERBS_SIW:-0}" != 1 ]; then
  echo "siw: not run: this boot has no siw0 (RSVERBS_SIW=1 loads it; make matrix does in every amd64 cell)"
  rm -f "$RESULTS_DIR/$SUITE.results"; rm -rf "$W"; exit 0
fi
if [ ! -d /sys/class/infiniband/$DEV ]; then
  fail "no $DEV in this guest (the test bed loads siw with RSVERBS_SIW=1)"
  finish; exit
fi
run() { # LABEL CMD...
  local label=$1; shift
  if ! strace -f -qq -o "$W/$label.strace" "$@" "$BIN/noop$([ "$label" = relinked ] && echo .rsv)" $DEV \
      > "$W/$label.out" 2> "$W/$label.err"; then
    fail "$label: noop exited non-zero:"; cat "$W/$label.err" >&2
  fi
  awk -f "$AWK" "$W/$label.strace" > "$W/$label.regions"
}
run reference
run relinked
run preload env LD_PRELOAD="$RSVERBS_LIB"

check "reference: served by libibverbs" grep -q '^served-by ibv_attach_mcast=libibverbs.so.1 ibv_detach_mcast=libibverbs.so.1$' "$W/reference.err"
n=$(grep -c ' ret=' "$W/reference.out")
check "reference: 12 cases and a 1000-call repeat" [ "$n" -ge 13 -a "$(grep -c '^repeat-1000 done' "$W/reference.out")" = 1 ]
check "reference: no system call between the markers" grep -q $'^calls\t0\t' "$W/reference.regions"
for m in relinked preload; do
  check "$m: served by librsverbs" grep -q '^served-by ibv_attach_mcast=librsverbs.so.1 ibv_detach_mcast=librsverbs.so.1$' "$W/$m.err"
  while IFS=$'\t' read -r a b; do
    if [ "$a" = "$b" ]; then pass "$m same as rdma-core: $a"; else fail "$m: rdma-core '$a' vs rsverbs '$b'"; fi
  done < <(paste "$W/reference.out" "$W/$m.out")
  if grep -q $'^calls\t0\t' "$W/$m.regions"; then
    pass "$m: no system call between the markers, as rdma-core"
  else
    fail "$m: system calls between the markers: $(cat "$W/$m.regions")"
  fi
done
grep -h '' "$W"/reference.out | sed 's/^/  siw0 rdma-core: /'
# rsverbs selftest (docs/selftest.md) on siw0: every case identical. siw
# makes no UD QP, so its attach and detach cases run on an RC QP, where
# rdma-core's dummy op answers first (the report says so).
T=${RSVERBS_TOOL:-$(dirname "$RSVERBS_LIB")/rsverbs}
if "$T" --version >/dev/null 2>&1; then
  "$T" selftest $DEV > "$W/selftest.out" 2> "$W/selftest.err"
  rc=$?
  check "rsverbs selftest $DEV: exit 0, every case identical (got $rc; $(tail -1 "$W/selftest.out"))" [ "$rc" = 0 ]
  check "rsverbs selftest $DEV: the attach and detach cases ran (on an RC QP)" \
    grep -q "skipped: the provider made no UD QP .*: the attach and detach cases ran on an RC QP" "$W/selftest.out"
else
  echo "skip siw selftest: $T does not run in this userland"
fi
mkdir -p "$RESULTS_DIR/siw" && cp "$W"/* "$RESULTS_DIR/siw/"
rm -rf "$W"
finish
