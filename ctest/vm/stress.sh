#!/usr/bin/env bash
# Concurrency and leaks, in the guest, on a Soft-RoCE device of our own
# (rxest on dummyst), so that the address churn cannot disturb other suites:
#   stress run:    8 threads x STRESS_ITERS mixed calls on shared and
#                  private contexts and QPs while a thread adds/removes
#                  addresses (the GID table changes underneath); every
#                  result checked, final state consistent;
#   stress cycles: CYCLES context open/close cycles with calls in each:
#                  no fd leaked, RSS not growing more than rdma-core's.
# Each in three modes (rdma-core, relinked, preloaded), compared, plus the
# rsverbs modes under AddressSanitizer (fewer calls). Throughputs are
# printed, never asserted.
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/robust_lib.bash"
W=$(mktemp -d)
T0=$(date +%s)
ITERS=${STRESS_ITERS:-10000}
THREADS=${STRESS_THREADS:-8}
CYCLES=${STRESS_CYCLES:-10000}
FORKS=${STRESS_FORKS:-150}
ND=dummyst RD=rxest

# ---- our device -----------------------------------------------------------
dummy_rxe $ND $RD 203.0.113.1/24 2001:db8:7::1/64
check "set up $RD on $ND" test $? -eq 0
ready() {
  local f g
  for f in /sys/class/infiniband/$RD/ports/1/gids/{0..7}; do
    read -r g < "$f" 2>/dev/null && [ "$g" = 0000:0000:0000:0000:0000:ffff:cb00:7101 ] && return 0
  done
  return 1
}
for ((i = 0; i < 300; i++)); do ready && break; sleep 0.1; done
check "$RD has its IPv4 GID" ready

# ---- concurrent calls -------------------------------------------------------
t0=$(date +%s)
for m in ref relinked preload; do
  case $m in
    ref) cmd=("$BIN/stress") ;;
    relinked) cmd=("$BIN/stress.rsv") ;;
    preload) cmd=(env LD_PRELOAD="$RSVERBS_LIB" "$BIN/stress") ;;
  esac
  t=$(date +%s)
  timeout 300 "${cmd[@]}" run -d $RD -i $ND -t "$THREADS" -n "$ITERS" > "$W/run.$m" 2> "$W/run.$m.err"
  rc=$?
  [ $rc -eq 124 ] && fail "run $m: deadlock or hang (timeout 300 s)"
  check "run $m: exits 0, every call's result as expected, final state consistent" \
    sh -c "[ $rc -eq 0 ] && grep -q '^R stress mismatches=0\$' '$W/run.$m' && grep -q '^R final owned-groups-detached-once=yes bad=0\$' '$W/run.$m' && grep -q '^R final destroy-failures=0\$' '$W/run.$m'"
  grep -v '^served-by' "$W/run.$m.err" | head -25 >&2
  echo "stress: $m: $(grep '^P stress' "$W/run.$m" | sed 's/^P stress //') (wall $(( $(date +%s) - t )) s)"
done
for m in relinked preload; do
  check "run $m served by librsverbs" grep -q 'served-by ibv_attach_mcast=librsverbs.so.1 ibv_detach_mcast=librsverbs.so.1 _ibv_query_gid_ex=librsverbs.so.1' "$W/run.$m.err"
  check "run $m: same R lines as rdma-core" cmp -s <(grep '^R ' "$W/run.ref") <(grep '^R ' "$W/run.$m")
done

echo "stress: concurrent calls took $(( $(date +%s) - t0 )) s"
# ---- fork while other threads are inside the library ----------------------
t0=$(date +%s)
for m in ref relinked preload; do
  case $m in
    ref) cmd=("$BIN/stress") ;;
    relinked) cmd=("$BIN/stress.rsv") ;;
    preload) cmd=(env LD_PRELOAD="$RSVERBS_LIB" "$BIN/stress") ;;
  esac
  timeout 300 "${cmd[@]}" forkload -d $RD -n "$FORKS" > "$W/forkload.$m" 2> "$W/forkload.$m.err"
  rc=$?
  check "forkload $m: $FORKS forks under 4 calling threads, no child hung or failed" \
    sh -c "[ $rc -eq 0 ] && grep -q '^R forkload forks=$FORKS hung=0 failed=0 mismatches=0\$' '$W/forkload.$m'"
  grep -v '^served-by' "$W/forkload.$m.err" | head -40 >&2
  echo "stress: $m: $(grep '^P forkload' "$W/forkload.$m" | sed 's/^P //')"
done

echo "stress: forkload took $(( $(date +%s) - t0 )) s"
# ---- open/close cycles ----------------------------------------------------
t0=$(date +%s)
# CYCLES (10,000) with rsverbs preloaded; CYCLES/5 for rdma-core and relinked,
# to keep the suite's time under TCG modest (~3 ms a cycle).
for m in ref relinked preload; do
  case $m in
    ref) cmd=("$BIN/stress"); n=$(( CYCLES / 5 )) ;;
    relinked) cmd=("$BIN/stress.rsv"); n=$(( CYCLES / 5 )) ;;
    preload) cmd=(env LD_PRELOAD="$RSVERBS_LIB" "$BIN/stress"); n=$CYCLES ;;
  esac
  timeout 600 "${cmd[@]}" cycles -d $RD -n "$n" > "$W/cycles.$m" 2> "$W/cycles.$m.err"
  rc=$?
  check "cycles $m: exits 0, all $n cycles' calls right, no fd leaked" \
    sh -c "[ $rc -eq 0 ] && grep -q '^R cycles=$n failed-cycles=0 fd-delta=0\$' '$W/cycles.$m'"
  echo "stress: $m: $(grep '^P cycles' "$W/cycles.$m" | sed 's/^P //')"
done
ref_rss=$(sed -n 's/^P rss-delta-kb //p' "$W/cycles.ref")
for m in relinked preload; do
  d=$(sed -n 's/^P rss-delta-kb //p' "$W/cycles.$m")
  # rsverbs keeps at most a few bytes per context address; allow 256 kB of
  # allocator noise over rdma-core's own growth.
  check "cycles $m: RSS growth ${d:-?} kB <= rdma-core's ${ref_rss:-?} kB + 256" \
    sh -c "[ -n '$d' ] && [ -n '$ref_rss' ] && [ $d -le \$(( ($ref_rss > 0 ? $ref_rss : 0) + 256 )) ]"
done

echo "stress: cycles took $(( $(date +%s) - t0 )) s"
# ---- the rsverbs modes under AddressSanitizer (fewer calls) ---------------
t0=$(date +%s)
A=$(asan_bin stress)
export ASAN_OPTIONS=detect_leaks=1:exitcode=86:verify_asan_link_order=0
AN=$(( ITERS / 10 )); AC=$(( CYCLES / 10 ))
for m in relinked preload; do
  case $m in
    relinked) cmd=("$A/stress.asan.rsv") ;;
    preload) cmd=(env LD_PRELOAD="$RSVERBS_LIB" "$A/stress.asan") ;;
  esac
  timeout 300 "${cmd[@]}" run -d $RD -i $ND -t "$THREADS" -n "$AN" > "$W/asan.run.$m" 2> "$W/asan.run.$m.err"
  rc=$?
  check "asan run $m ($THREADS x $AN): exit 0, no ASan report, results as expected" \
    sh -c "[ $rc -eq 0 ] && ! grep -q 'ERROR: .*Sanitizer' '$W/asan.run.$m.err' && grep -q '^R stress mismatches=0\$' '$W/asan.run.$m' && grep -q '^R final destroy-failures=0\$' '$W/asan.run.$m'"
  timeout 300 "${cmd[@]}" cycles -d $RD -n "$AC" > "$W/asan.cycles.$m" 2> "$W/asan.cycles.$m.err"
  rc=$?
  check "asan cycles $m ($AC): exit 0, no ASan/LSan report" \
    sh -c "[ $rc -eq 0 ] && ! grep -q 'ERROR: .*Sanitizer' '$W/asan.cycles.$m.err' && grep -q 'failed-cycles=0 fd-delta=0' '$W/asan.cycles.$m'"
  grep -h 'ERROR: \|SUMMARY: ' "$W/asan.run.$m.err" "$W/asan.cycles.$m.err" | head -5 >&2
done
unset ASAN_OPTIONS
echo "stress: ASan runs took $(( $(date +%s) - t0 )) s"

dummy_rxe_remove
trap - EXIT
check "$RD and $ND removed" sh -c "[ ! -e /sys/class/infiniband/$RD ] && ! ip link show $ND >/dev/null 2>&1"
mkdir -p /out/stress && cp "$W"/* /out/stress/
rm -rf "$W"
echo "stress: suite took $(( $(date +%s) - T0 )) s"
finish
