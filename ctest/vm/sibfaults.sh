#!/usr/bin/env bash
# The stack budget and the injected faults on InfiniBand: ctest/vm/stack.sh
# and ctest/vm/faults.sh (which make check and make faults run on rxe1,
# with the fabric join forced onto RoCE) run again on sib0, the test bed's
# software InfiniBand HCA (testbed/sib/), as nested suites with results of
# their own (stack_ib, faults_ib), so that the fabric join's InfiniBand path
# (the IPoIB netdev lookup, the AF_IB address, the SA join through opensm,
# its event; docs/fabric-join.md) has its stack measured and its syscalls
# failed on purpose. In make check-sib, after sib.sh, before sibswitch.sh.
#   1. sib loaded back to back (no switch), ib_umad, opensm on sib0, both
#      ports ACTIVE; IPoIB: sib0's netdev (ib0) up with 10.77.0.1/24 (the
#      fabric join binds to its IPv4 address) and its broadcast group joined
#      (carrier on: ipoib_multicast.c turns it on after that join);
#   2. stack.sh on sib0 (SUITE=stack_ib): InfiniBand MGIDs (rdma_cm's for
#      239.10.10.10, .12 and .11), LID 0xc001, RSVERBS_MCAST_FABRICJOIN=1,
#      every mode but pending (sib's GID table has one entry,
#      SIB_GID_TBL_LEN: indexes 9 to 11 are EINVAL, not the ENODATA run the
#      mode makes pending);
#   3. faults.sh on sib0/ib0 (SUITE=faults_ib), paths plain and fabric,
#      every axis (FAULTS_AXES narrows them, FAULTS_PATHS the paths), and
#      the fabric path's trace must show joins through the SA on ib0;
#   4. opensm stopped, rmmod sib, a clean kernel log.
#
#   RSVERBS_SIB=1 RSVERBS_SUITES=sibfaults ctest/vm_suite.sh
set -uo pipefail
export RESULTS_DIR=${RESULTS_DIR:-${RSVERBS_OUT:-$(cd "$(dirname "$0")/.." && pwd)/out}}
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/sib.bash"
W=$(mktemp -d)
trap 'osm_stop; mkdir -p "$RESULTS_DIR/sibfaults" && cp -r "$W"/. "$RESULTS_DIR/sibfaults/"; rm -rf "$W"' EXIT
BIN=${BIN:-$ROOT/ctest/out/bin}
export BIN RSVERBS_LIB

if [ "${RSVERBS_SIB:-0}" != 1 ]; then
  echo "sibfaults: not run: this boot has no sib (RSVERBS_SIB=1 loads it)"
  rm -f "$RESULTS_DIR/$SUITE.results"; exit 0
fi
carrier() { [ "$(cat "/sys/class/net/$1/carrier" 2>/dev/null)" = 1 ]; }
nd=
dmesg_at=$(dmesg | wc -l)
if ! command -v opensm > /dev/null; then
  fail "no opensm in this userland (testbed/vm.sh USERLAND_PACKAGES: opensm)"
elif ! { ! lsmod | grep -q '^sib ' || rmmod sib; } || ! /run/rsverbs/modprobe ib_umad 2> "$W/modprobe.err" ||
  ! insmod $KO 2> "$W/insmod.err" || ! wait_until 10 test -d $S/sib1; then
  fail "insmod sib with ib_umad: $(cat "$W/modprobe.err" "$W/insmod.err" 2>/dev/null)"
else
  pass "insmod sib (back to back) with ib_umad loaded"
  osm_start "$W/opensm.log"
  if wait_until 120 both_active; then pass "opensm brought sib0 and sib1 to ACTIVE"; else fail "opensm: not ACTIVE: $(cat $S/sib0/ports/1/state $S/sib1/ports/1/state | tr '\n' ' ')"; fi
  if /run/rsverbs/modprobe ib_ipoib 2> "$W/ipoib.err" && wait_until 10 test -n "$(ipoib_of sib0)"; then
    nd=$(ipoib_of sib0)
    ip addr add 10.77.0.1/24 dev "$nd" && ip link set "$nd" up
  fi
  up=0
  [ -n "$nd" ] && ip -4 addr show dev "$nd" | grep -q 'inet 10\.77\.0\.1/' && wait_until 60 carrier "$nd" && up=1
  check "IPoIB: sib0's netdev (${nd:-none}) up with 10.77.0.1, its broadcast group joined (carrier)" test "$up" = 1
fi

if [ -n "$nd" ] && both_active; then
  # rdma_cm's MGIDs of 239.10.10.10, .12 and .11 on InfiniBand (cma.c
  # cma_set_mgid, ip_ib_mc_map: ff12:4001:ffff:: and the low 28 bits).
  start=$SECONDS
  SUITE=stack_ib STACK_DEV=sib0 STACK_FABRIC=1 STACK_LID=0xc001 STACK_MODES="plain features hints fabric fabricfail eacces" \
    STACK_GROUPS="ff124001ffff0000000000000f0a0a0a ff124001ffff0000000000000f0a0a0c" \
    STACK_CRED_GROUP=ff124001ffff0000000000000f0a0a0b bash "$ROOT/ctest/vm/stack.sh"
  rc=$?
  t_stack=$((SECONDS - start))
  check "stack_ib: stack.sh on sib0 exits 0 (rc $rc, $t_stack s; its checks in stack_ib.results)" test "$rc" -eq 0
  start=$SECONDS
  SUITE=faults_ib FAULTS_DEV=sib0 FAULTS_NETDEV="$nd" FAULTS_IB=1 FAULTS_LID=0xc001 FAULTS_FABRIC=1 \
    FAULTS_PATHS="${FAULTS_PATHS:-plain fabric}" bash "$ROOT/ctest/vm/faults.sh"
  rc=$?
  t_faults=$((SECONDS - start))
  check "faults_ib: faults.sh on sib0/$nd exits 0 (rc $rc, $t_faults s; its checks in faults_ib.results)" test "$rc" -eq 0
  # The fabric path joined through the SA: its trace has the joins' events
  # on the IPoIB netdev, with the SA's multicast LID.
  if grep -qw fabric <<< "${FAULTS_PATHS:-plain fabric}"; then
    n=$(grep -c "fabricjoin joined netdev=$nd .* mlid=0x[c-f]" "$RESULTS_DIR/faults_ib/trace.fabric" 2>/dev/null)
    check "faults_ib: the fabric path joined through opensm's SA on $nd (${n:-0} joins traced)" test "${n:-0}" -gt 0
  fi
  echo "sibfaults: stack_ib $t_stack s, faults_ib $t_faults s"
fi
osm_stop
if lsmod | grep -q '^sib '; then sib_unload "after the stack and faults runs" "$dmesg_at" dmesg.sibfaults; fi
finish
