#!/usr/bin/env bash
# Differential random test, in the guest: diffrand.c applies the same random
# attach/detach/query_gid_ex operations, then query_gid and query_gid_table
# ones (a quarter as many), to twin objects on rxe0 and rxe1 (DIFFRAND_DEVS:
# sib0 sib1 in make check-sib's InfiniBand cell),
# through rdma-core and through rsverbs (dlopen'ed), and compares return
# value, errno and the entry buffer of every call. Each operation is one
# PASS line in the results (written by diffrand itself), each divergence one
# FAIL line.
#
# Every seed in ctest/regress/diffrand.seeds is replayed first, then one
# random seed ($DIFFRAND_SEED to force one). Each runs in three modes: the
# kernel ioctl path, and under ctest/vm/noioctl with ENOTTY and with
# EPROTONOSUPPORT (rdma-core's and rsverbs' write() and sysfs fallbacks). A
# divergence prints "REGRESSION SEED n": add n to the seeds file.
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
SEEDS_FILE=$(cd "$(dirname "$0")/.." && pwd)/regress/diffrand.seeds
IOCTL_OPS=${DIFFRAND_OPS:-15000}            # per seed, ioctl mode
FALLBACK_OPS=${DIFFRAND_FALLBACK_OPS:-4000} # per seed, each fallback mode (~1 ms an op under TCG)
TMO=${DIFFRAND_TIMEOUT:-300}                # seconds, for any one run (slower kernels need more)
W=$(mktemp -d)
total_ops=0 runs=0 diverged=0

# run_seed SEED OPS|"" : the seed in the three modes.
run_seed() {
  local seed=$1 ops_override=$2 mode ops rc out err n wrap fb
  for mode in ioctl ENOTTY EPROTONOSUPPORT; do
    if [ "$mode" = ioctl ]; then wrap=(); fb=(); ops=$IOCTL_OPS
    else wrap=("$BIN/noioctl" "$mode"); fb=(--fallback); ops=$FALLBACK_OPS; fi
    [ -n "$ops_override" ] && ops=$ops_override
    out=$W/$mode.$seed.out err=$W/$mode.$seed.err rc=0
    timeout -k 5 "$TMO" "${wrap[@]}" "$BIN/diffrand" --lib "$RSVERBS_LIB" "${fb[@]}" --label "$mode" \
      --seed "$seed" --ops "$ops" --results "$RESULTS_DIR/$SUITE.results" ${DIFFRAND_DEVS:-rxe0 rxe1} > "$out" 2> "$err" || rc=$?
    runs=$((runs + 1))
    grep -v '^served-by' "$out"
    n=$(sed -n "s/^$mode: seed [0-9]*: \([0-9]*\) ops in .*/\1/p" "$out")
    total_ops=$((total_ops + ${n:-0}))
    case $rc in
      0) ;;
      1) diverged=$((diverged + 1))
         # The FAIL lines are diffrand's own (one per divergence); this only
         # makes lib.sh's finish return failure.
         # shellcheck disable=SC2034
         suite_failed=1
         echo "diffrand: $mode seed $seed: divergences between rdma-core and rsverbs:" >&2
         head -60 "$err" >&2 ;;
      124|137) fail "$mode seed $seed: timed out after $TMO s"; cat "$err" >&2 ;;
      *) fail "$mode seed $seed: exit status $rc"; tail -20 "$err" >&2 ;;
    esac
    if grep -q 'QPs could not be destroyed' "$out"; then
      fail "$mode seed $seed: QPs left attached (not destroyable) after the cleanup"
    fi
    if [ "$rc" -le 1 ]; then
      if [ "${n:-0}" -lt "$ops" ]; then fail "$mode seed $seed: only ${n:-0} of $ops ops ran"; fi
      if ! grep -q '^served-by reference: ibv_attach_mcast=libibverbs.so.1 ibv_detach_mcast=libibverbs.so.1 _ibv_query_gid_ex=libibverbs.so.1$' "$out" ||
         ! grep -q '^served-by twin: rsverbs_attach_mcast=librsverbs.so.1 rsverbs_detach_mcast=librsverbs.so.1 rsverbs_query_gid_ex=librsverbs.so.1$' "$out" ||
         ! grep -q '^served-by reference-gid: ibv_query_gid=libibverbs.so.1 _ibv_query_gid_table=libibverbs.so.1$' "$out" ||
         ! grep -q '^served-by twin-gid: rsverbs_query_gid=librsverbs.so.1 rsverbs_query_gid_table=librsverbs.so.1$' "$out"; then
        fail "$mode seed $seed: the twins are not served by libibverbs and librsverbs:"; grep '^served-by' "$out" >&2
      fi
    fi
  done
}

start=$(date +%s)
if [ -r "$SEEDS_FILE" ]; then
  while read -r seed ops _; do
    run_seed "$seed" "${ops:-}"
  done < <(sed 's/#.*//' "$SEEDS_FILE" | awk 'NF')
else
  fail "no seeds file $SEEDS_FILE"
fi
seed=${DIFFRAND_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
echo "diffrand: random seed $seed"
run_seed "$seed" ""

echo "diffrand: $total_ops ops compared in $runs runs ($(( $(date +%s) - start )) s), $diverged runs diverged"
if [ "$diverged" -gt 0 ]; then
  grep -h '^REGRESSION SEED' "$W"/*.out | sort -u >&2
  echo "diffrand: add every REGRESSION SEED above to ctest/regress/diffrand.seeds" >&2
fi
mkdir -p "$RESULTS_DIR/diffrand" && cp "$W"/* "$RESULTS_DIR/diffrand/" 2>/dev/null
rm -rf "$W"
finish
