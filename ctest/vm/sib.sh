#!/usr/bin/env bash
# sib, the project's software InfiniBand HCA (testbed/sib/sib.c):
# two IB devices with one port each, the verbs of a UD QP, the UD data path
# across the cable between them, and its SMA (the ports stay INIT, LID 0,
# until opensm runs, unless the module is loaded with fixed_lids=1). Loaded
# by the test bed with RSVERBS_SIB=1; opt-in in ctest/guest_suite.sh, run by
# make check-sib (in CI every commit). What it asserts, with
# rdma-core's own tools and its stock ipathverbs provider (the device reports
# driver_id QIB and uverbs ABI 1, so ipathverbs sends every verb to the
# kernel): ibv_devices, ibv_devinfo, rdma link, the sysfs GID, GID type and
# P_Key; a UD QP's verbs through libibverbs (testbed/sib/sibud.c, built here
# with the guest's gcc), the multicast answers compared with a real HCA's
# (a second attach 0, a detach of what is not attached EINVAL: ib_uverbs
# answers both before the driver; LID 0 refused by the kernel core's
# is_valid_mcast_lid); the kernel MAD layer's QP0 and QP1 in RTS; then
# rmmod sib with no WARNING or BUG in the kernel log, and a second insmod.
#
#   RSVERBS_SIB=1 testbed/vm.sh run --timeout 900 -- bash ctest/vm/sib.sh
set -uo pipefail
# Run on its own (testbed/vm.sh run -- bash ctest/vm/sib.sh), the results go
# to the guest's /out, as under ctest/guest_suite.sh.
export RESULTS_DIR=${RESULTS_DIR:-${RSVERBS_OUT:-$(cd "$(dirname "$0")/.." && pwd)/out}}
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/sib.bash"
W=$(mktemp -d)

if [ "${RSVERBS_SIB:-0}" != 1 ]; then
  echo "sib: not run: this boot has no sib0 (RSVERBS_SIB=1 loads it)"
  rm -f "$RESULTS_DIR/$SUITE.results"; rm -rf "$W"; exit 0
fi
if [ ! -d /sys/class/infiniband/sib0 ] || [ ! -d /sys/class/infiniband/sib1 ]; then
  fail "no sib0/sib1 in this guest (the test bed loads sib.ko with RSVERBS_SIB=1)"
  finish; exit
fi
# rsverbs_twin NAME "VERB..." CMD...: CMD again with librsverbs.so.1
# preloaded (the guest suite's RSVERBS_LIB): its output must be the plain
# run's ($W/NAME), line for line, and each VERB (those CMD
# calls) must have bound to librsverbs: rsverbs' verbs on an InfiniBand
# port, against rdma-core's in the same boot.
rsverbs_twin() {
  local name=$1 verbs=$2 ref v; shift 2
  ref=$W/$name
  if [ ! -e "${RSVERBS_LIB:-}" ]; then fail "$name with rsverbs: no librsverbs.so.1 (RSVERBS_LIB=${RSVERBS_LIB:-})"; return; fi
  env LD_PRELOAD="$RSVERBS_LIB" LD_DEBUG=bindings LD_DEBUG_OUTPUT="$W/$name.ldd" "$@" > "$W/$name.rsverbs" 2>&1
  if diff -u "$ref" "$W/$name.rsverbs" > "$W/$name.diff"; then
    pass "$name with librsverbs.so.1 preloaded: the same $(wc -l < "$ref") lines as with rdma-core alone"
  else
    fail "$name with librsverbs.so.1 preloaded differs from rdma-core alone:"; sed 's/^/    /' "$W/$name.diff" >&2
  fi
  for v in $verbs; do
    check "$name: $v bound to librsverbs.so.1" grep -qF "to $RSVERBS_LIB [0]: normal symbol \`$v'" $W/$name.ldd.*
  done
}

ibv_devices > "$W/ibv_devices" 2>&1
show ibv_devices "$W/ibv_devices"
check "ibv_devices lists sib0 (served by the stock ipathverbs)" grep -Eq '^\s+sib0\s+0200005349420000$' "$W/ibv_devices"
check "ibv_devices lists sib1" grep -Eq '^\s+sib1\s+0200005349420100$' "$W/ibv_devices"

for d in sib0 sib1; do
  ibv_devinfo -v -d $d > "$W/devinfo.$d" 2>&1
  show "ibv_devinfo -v -d $d" "$W/devinfo.$d"
  check "$d: transport InfiniBand" grep -Eq '^\s+transport:\s+InfiniBand \(0\)$' "$W/devinfo.$d"
  check "$d: link_layer InfiniBand" grep -Eq '^\s+link_layer:\s+InfiniBand$' "$W/devinfo.$d"
  check "$d: port state PORT_INIT (no SM)" grep -Eq '^\s+state:\s+PORT_INIT \(2\)$' "$W/devinfo.$d"
  check "$d: phys_state LINK_UP" grep -Eq '^\s+phys_state:\s+LINK_UP \(5\)$' "$W/devinfo.$d"
  check "$d: port_lid 0" grep -Eq '^\s+port_lid:\s+0$' "$W/devinfo.$d"
  check "$d: max_mcast_grp nonzero" grep -Eq '^\s+max_mcast_grp:\s+[1-9][0-9]*$' "$W/devinfo.$d"
  check "$d: max_mcast_qp_attach nonzero" grep -Eq '^\s+max_mcast_qp_attach:\s+[1-9][0-9]*$' "$W/devinfo.$d"
  check "$d: max_total_mcast_qp_attach nonzero" grep -Eq '^\s+max_total_mcast_qp_attach:\s+[1-9][0-9]*$' "$W/devinfo.$d"
done

rdma link show > "$W/rdma_link" 2>&1
rdma dev show > "$W/rdma_dev" 2>&1
show "rdma link" "$W/rdma_link"
show "rdma dev" "$W/rdma_dev"
for d in sib0 sib1; do
  check "rdma link: $d/1 INIT LINK_UP" grep -Eq "^link $d/1 (.* )?state INIT physical_state LINK_UP( |$)" "$W/rdma_link"
  check "rdma link: $d/1 subnet_prefix fe80::, lid 0, sm_lid 0" grep -Eq "^link $d/1 subnet_prefix fe80:0000:0000:0000 lid 0 sm_lid 0 lmc 0 " "$W/rdma_link"
done

# The kernel MAD layer's own QP0 (SMI) and QP1 (GSI) on each port, created
# and brought to RTS through sib's create_qp/modify_qp at registration.
rdma res show qp > "$W/rdma_res_qp" 2>&1
show "rdma res show qp" "$W/rdma_res_qp"
for d in sib0 sib1; do
  check "$d: the MAD layer's QP0 (SMI) in RTS" grep -Eq "^link $d/1 lqpn 0 type SMI state RTS " "$W/rdma_res_qp"
  check "$d: the MAD layer's QP1 (GSI) in RTS" grep -Eq "^link $d/1 lqpn 1 type GSI state RTS " "$W/rdma_res_qp"
done

for d in 0 1; do
  check "sib$d: node_guid 0200:0053:4942:0${d}00" [ "$(cat $S/sib$d/node_guid)" = "0200:0053:4942:0${d}00" ]
  check "sib$d: node_type 1: CA" [ "$(cat $S/sib$d/node_type)" = "1: CA" ]
  check "sib$d: gids/0 is fe80::/64 + port GUID" [ "$(cat $S/sib$d/ports/1/gids/0)" = "fe80:0000:0000:0000:0200:0053:4942:0${d}01" ]
  check "sib$d: gid_attrs/types/0 IB/RoCE v1" [ "$(cat $S/sib$d/ports/1/gid_attrs/types/0)" = "IB/RoCE v1" ]
  check "sib$d: pkeys/0 0xffff" [ "$(cat $S/sib$d/ports/1/pkeys/0)" = "0xffff" ]
  check "sib$d: link_layer InfiniBand" [ "$(cat $S/sib$d/ports/1/link_layer)" = "InfiniBand" ]
  check "sib$d: lid 0x0" [ "$(cat $S/sib$d/ports/1/lid)" = "0x0" ]
done

# The verbs of a UD QP through libibverbs and ipathverbs.
if ! cc -O2 -Wall -Werror -o "$W/sibud" "$ROOT/testbed/sib/sibud.c" -libverbs 2> "$W/cc.err"; then
  fail "sibud.c does not build:"; cat "$W/cc.err" >&2
else
  for d in sib0 sib1; do
    if ! "$W/sibud" $d > "$W/sibud.$d" 2>&1; then fail "$d: sibud exited non-zero"; fi
    show "sibud $d" "$W/sibud.$d"
    rsverbs_twin "sibud.$d" "ibv_attach_mcast ibv_detach_mcast" "$W/sibud" $d
    want() { # LINE DESCRIPTION
      if grep -qxF "$1" "$W/sibud.$d"; then pass "$d: $2: $1"; else fail "$d: $2: want '$1', got '$(grep -F "${1%% *}" "$W/sibud.$d" | head -1)'"; fi
    }
    want "port state=2 link_layer=1 lid=0" "ibv_query_port: INIT, InfiniBand"
    for v in modify_init modify_rtr modify_rts query_qp post_recv create_ah; do want "$v ret=0" "$v succeeds"; done
    want "query_qp state=3 qkey=0x11111111" "query_qp gives back RTS and the Q_Key"
    # INIT, no LID: the send completes (UD), nothing leaves the port.
    want "post_send ret=0" "post_send on a port that is not ACTIVE: accepted"
    want "attach_c001 ret=0" "attach ff12:401b::1 LID 0xc001"
    # ib_uverbs keeps each user QP's attachments and answers these two
    # itself, before the driver (uverbs_cmd.c, ib_uverbs_attach_mcast and
    # _detach_mcast: read; and run: a sib.ko whose detach of an absent group
    # answered 0 still gave EINVAL here). sib's own answers, 0 and EINVAL as
    # mlx4 and rxe, are reached only by kernel callers (IPoIB, step 3).
    want "attach_c001_again ret=0" "a second attach succeeds (ib_uverbs answers)"
    want "detach_c001 ret=0" "detach"
    want "detach_c001_again ret=22 Invalid argument" "detach of a group not attached: EINVAL (ib_uverbs answers)"
    want "attach_lid0 ret=22 Invalid argument" "attach with LID 0: EINVAL from the kernel core (is_valid_mcast_lid)"
    want "req_notify ret=0" "req_notify_cq"
    want "modify_err ret=0" "modify to ERR"
    want "cq_event=yes" "completion event (from the work item)"
    want "poll n=2 wr_id=8 status=success wr_id=7 status=Work Request Flushed Error" "the send's completion, then the posted receive flushed"
    for v in destroy_ah destroy_qp dereg_mr destroy_cq destroy_comp_channel dealloc_pd close_device; do want "$v ret=0" "$v"; done
  done
fi

# Unload: clean, nothing in the kernel log; then load again.
dmesg > "$W/dmesg.before"
if rmmod sib 2> "$W/rmmod.err"; then pass "rmmod sib"; else fail "rmmod sib: $(cat "$W/rmmod.err")"; fi
check "sib0 and sib1 are gone" [ ! -e $S/sib0 -a ! -e $S/sib1 ]
dmesg > "$W/dmesg.after"
awk '/sib: sib0 and sib1 registered/ { on = 1 } on' "$W/dmesg.after" > "$W/dmesg.sib"
show dmesg "$W/dmesg.sib"
check "no WARNING, BUG or Call Trace in the kernel log since sib loaded" \
  bash -c "! grep -Eq 'WARNING|BUG|Call Trace|refcount|leak' '$W/dmesg.sib'"
if [ -e $KO ]; then
  if insmod $KO 2> "$W/insmod.err"; then pass "insmod sib again"; else fail "insmod sib again: $(cat "$W/insmod.err")"; fi
  check "sib0 and sib1 again" wait_until 10 test -d $S/sib1
fi

# The data path (step 2): loaded again with fixed_lids=1, the test bed's
# hook until the SMA: both ports ACTIVE, sib0 LID 1, sib1 LID 2, SM LID 1.
if [ -e $KO ] && rmmod sib && insmod $KO fixed_lids=1 2> "$W/insmod.err" && wait_until 10 test -d $S/sib1; then
  pass "insmod sib fixed_lids=1"
  for d in 0 1; do
    check "sib$d: port ACTIVE with fixed_lids" [ "$(cat $S/sib$d/ports/1/state)" = "4: ACTIVE" ]
    check "sib$d: LID $((d + 1)), SM LID 1" [ "$(cat $S/sib$d/ports/1/lid) $(cat $S/sib$d/ports/1/sm_lid)" = "0x$((d + 1)) 0x1" ]
  done
  if ! cc -O2 -Wall -Werror -o "$W/sibdata" "$ROOT/testbed/sib/sibdata.c" -libverbs 2> "$W/cc2.err"; then
    fail "sibdata.c does not build:"; cat "$W/cc2.err" >&2
  else
    "$W/sibdata" > "$W/sibdata.out" 2> "$W/sibdata.err"
    st=$?
    show sibdata "$W/sibdata.out"; show "sibdata (stderr)" "$W/sibdata.err"
    check "sibdata ran to its end (exit 0)" [ "$st" = 0 ]
    rsverbs_twin sibdata.out "ibv_attach_mcast ibv_detach_mcast ibv_query_gid" "$W/sibdata"
    have() { # REGEX DESCRIPTION
      if grep -Eqx "$1" "$W/sibdata.out"; then pass "data: $2"; else fail "data: $2: want /$1/, got '$(grep -F "${1%% *}" "$W/sibdata.out" | head -1)'"; fi
    }
    qa=$(sed -n 's/^qpn a=\([0-9]*\) .*/\1/p' "$W/sibdata.out")
    qd=$(sed -n 's/^qpn .* d=\([0-9]*\)$/\1/p' "$W/sibdata.out")
    ok="status=success byte_len"
    for v in send_plain send_grh send_mtu send_small send_bad_qkey send_fence send_own_qkey send_to_pkey0 send_fence_pkey send_loop send_mcast send_fence_a send_mcast2 send_fence_b \
      send_mcast3 send_fence_b3 send_mcast4 send_fence_b4; do
      have "$v ret=0" "$v: posted and completed"
    done
    have "recv_plain wr_id=1 $ok=296 src_qp=$qa slid=1 grh=0 imm=0 data=ok" "unicast sib0 -> sib1: 256 bytes after the 40-byte GRH area, from QP a, SLID 1"
    have "plain_grh_area_untouched yes" "without a GRH the first 40 bytes are left as they were"
    have "recv_grh wr_id=2 $ok=1040 src_qp=$qa slid=1 grh=1 imm=0 data=ok" "with a GRH: IBV_WC_GRH"
    have "grh version=6 next_hdr=0x1b paylen=1024 sgid_is_a=1 dgid_is_b=1" "the GRH: IPVer 6, next header BTH, PayLen 12+8+1000+4, SGID the sender's, DGID the AH's"
    have "recv_mtu wr_id=3 $ok=4136 src_qp=$qa slid=1 grh=0 imm=0 data=ok" "a full 4096-byte MTU"
    have "send_over_mtu ret=22" "4097 bytes: refused at post (EINVAL)"
    have "recv_small wr_id=4 status=local length error .*" "a receive smaller than 40 + payload: IBV_WC_LOC_LEN_ERR"
    have "recv_after_bad_qkey wr_id=5 $ok=104 src_qp=$qa slid=1 grh=0 imm=0 data=ok" "another Q_Key: dropped (the next good datagram is the first received)"
    have "qkey_viol_cntr_rise 1" "another Q_Key: counted in qkey_viol_cntr"
    have "recv_own_qkey wr_id=6 $ok=104 src_qp=$qa slid=1 grh=0 imm=0 data=ok" "remote_qkey with bit 31 set: the sending QP's own Q_Key"
    have "recv_after_bad_pkey wr_id=16 $ok=104 src_qp=$qa slid=1 grh=0 imm=0 data=ok" "the fence after the P_Key 0x0000 QP"
    have "bad_pkey_cntr_rise 1" "a P_Key that matches nothing: counted in bad_pkey_cntr"
    have "pkey0_polled 0" "... and not received"
    have "recv_loop wr_id=8 $ok=104 src_qp=$qa slid=1 grh=0 imm=0 data=ok" "unicast to the sending port's own LID: looped back"
    for q in b c d; do
      have "mcast_$q wr_id=[0-9]+ $ok=552 src_qp=$qa slid=1 grh=1 imm=0 data=ok" "multicast to MLID 0xc001: QP $q attached, receives it once"
    done
    have "sender_first_recv wr_id=12 $ok=104 src_qp=$qd slid=1 grh=0 imm=0 data=ok" "the sending QP, attached, does not receive its own multicast"
    have "mcast2_c wr_id=14 $ok=552 src_qp=$qa slid=1 grh=1 imm=0 data=ok" "after b's detach: c still receives"
    have "mcast2_d wr_id=15 $ok=552 src_qp=$qa slid=1 grh=1 imm=0 data=ok" "after b's detach: d (beside the sender) still receives"
    have "detached_first_recv wr_id=13 $ok=104 src_qp=$qa slid=1 grh=0 imm=0 data=ok" "after its detach b receives no multicast (the next unicast is its first)"
    have "reattach_b rc=0" "b attached again: 0"
    have "reattach_b_dup rc=0" "... and a duplicate attach: 0"
    for q in b c d; do
      have "mcast3_$q wr_id=[0-9]+ $ok=552 src_qp=$qa slid=1 grh=1 imm=0 data=ok" "after the re-attach: QP $q receives the group's next datagram"
    done
    have "mcast3_b_once wr_id=21 $ok=104 src_qp=$qa slid=1 grh=0 imm=0 data=ok" "... b once, for all its duplicate attach (the next unicast is its next completion)"
    have "detach_b_again rc=0" "b detached again: 0"
    have "mcast4_c wr_id=23 $ok=552 src_qp=$qa slid=1 grh=1 imm=0 data=ok" "after one detach: c (the witness) receives the group's next datagram"
    have "detached_again_first_recv wr_id=22 $ok=104 src_qp=$qa slid=1 grh=0 imm=0 data=ok" "... and b none: one detach ended its duplicate attach too"
  fi
  # rdma-core's own UD ping-pong across the cable, with GRH (-g 0).
  ibv_ud_pingpong -d sib1 -g 0 -n 200 -s 1024 > "$W/udpp.server" 2>&1 &
  srv=$!
  wait_until 10 tcp_listening 18515
  timeout 60 ibv_ud_pingpong -d sib0 -g 0 -n 200 -s 1024 127.0.0.1 > "$W/udpp.client" 2>&1
  cst=$?
  wait "$srv"; sst=$?
  show "ibv_ud_pingpong server" "$W/udpp.server"; show "ibv_ud_pingpong client" "$W/udpp.client"
  check "ibv_ud_pingpong sib0 -> sib1: the client's 200 iterations (exit $cst)" \
    bash -c "[ $cst = 0 ] && grep -Eq '^[0-9]+ iters in ' '$W/udpp.client'"
  check "ibv_ud_pingpong: the server's too (exit $sst)" bash -c "[ $sst = 0 ] && grep -Eq '^[0-9]+ iters in ' '$W/udpp.server'"
  dmesg > "$W/dmesg.before2"
  if rmmod sib 2> "$W/rmmod.err"; then pass "rmmod sib after the data path"; else fail "rmmod sib after the data path: $(cat "$W/rmmod.err")"; fi
  dmesg > "$W/dmesg.after2"
  awk '/fixed LIDs 1 and 2, ACTIVE/ { on = 1 } on' "$W/dmesg.after2" > "$W/dmesg.sib2"
  show dmesg "$W/dmesg.sib2"
  check "no WARNING, BUG or Call Trace in the kernel log since the data path's load" \
    bash -c "! grep -Eq 'WARNING|BUG|Call Trace|refcount|leak' '$W/dmesg.sib2'"
else
  fail "insmod sib fixed_lids=1: $(cat "$W/insmod.err" 2>/dev/null)"
fi
# The SMA (step 3): loaded again without fixed_lids (INIT, LID 0), the real
# subnet manager, opensm, on sib0's port discovers both ports through sib's
# SMA (directed-route SMPs across the cable), assigns the LIDs and brings
# them to ACTIVE; its SA answers over the GSI data path; a restart makes it
# set ClientReregister, which sib raises as IB_EVENT_CLIENT_REREGISTER.
# (/run/rsverbs/modprobe: the guest's modprobe on the booted kernel's
# module tree, testbed/guest/stage2.sh.)
if ! command -v opensm > /dev/null || ! command -v saquery > /dev/null; then
  fail "no opensm or saquery in this userland (testbed/vm.sh USERLAND_PACKAGES: opensm infiniband-diags)"
elif ! dmesg_at=$(dmesg | wc -l) || ! { lsmod | grep -q '^sib ' && rmmod sib || true; } || ! /run/rsverbs/modprobe ib_umad 2> "$W/modprobe.err" ||
  ! insmod $KO 2> "$W/insmod.err" || ! wait_until 10 test -d $S/sib1; then
  fail "sib with ib_umad: $(cat "$W/modprobe.err" "$W/insmod.err" 2>/dev/null)"
else
  pass "insmod sib (no fixed LIDs) with ib_umad loaded"
  check "both ports INIT before the SM" [ "$(cat $S/sib0/ports/1/state $S/sib1/ports/1/state | tr '\n' ' ')" = "2: INIT 2: INIT " ]
  osm_start "$W/opensm.log"
  if wait_until 120 both_active; then pass "opensm brought sib0 and sib1 to ACTIVE"; else fail "opensm did not bring both ports to ACTIVE: $(cat $S/sib0/ports/1/state $S/sib1/ports/1/state | tr '\n' ' ')"; fi
  l0=$(($(cat $S/sib0/ports/1/lid))); l1=$(($(cat $S/sib1/ports/1/lid)))
  m0=$(($(cat $S/sib0/ports/1/sm_lid))); m1=$(($(cat $S/sib1/ports/1/sm_lid)))
  check "LIDs assigned by the SM: sib0 $l0, sib1 $l1 (unicast, distinct)" \
    bash -c "[ $l0 -ge 1 ] && [ $l0 -lt 49152 ] && [ $l1 -ge 1 ] && [ $l1 -lt 49152 ] && [ $l0 != $l1 ]"
  check "both ports name the SM's LID, sib0's own ($m0, $m1; sib0 $l0)" [ "$m0 $m1" = "$l0 $l0" ]
  ibv_devinfo -v -d sib1 > "$W/devinfo3.sib1" 2>&1; show "ibv_devinfo -v -d sib1 (opensm)" "$W/devinfo3.sib1"
  check "ibv_devinfo -v sib1: PORT_ACTIVE, sm_lid $l0, port_lid $l1" bash -c \
    "grep -Eq 'state:\s+PORT_ACTIVE \(4\)' '$W/devinfo3.sib1' && grep -Eq 'sm_lid:\s+$l0\$' '$W/devinfo3.sib1' && grep -Eq 'port_lid:\s+$l1\$' '$W/devinfo3.sib1'"
  ibstat sib1 1 > "$W/ibstat.sib1" 2>&1; show "ibstat sib1" "$W/ibstat.sib1"
  check "ibstat sib1: State: Active, Physical state: LinkUp, SM lid $l0" \
    bash -c "grep -q 'State: Active' '$W/ibstat.sib1' && grep -q 'Physical state: LinkUp' '$W/ibstat.sib1' && grep -q 'SM lid: $l0\$' '$W/ibstat.sib1'"
  check "ibstat sib1: ClientReregister advertised (capability mask bit 25)" \
    bash -c "(( \$(sed -n 's/.*Capability mask: //p' '$W/ibstat.sib1') & 0x02000000 ))"
  timeout 60 saquery -C sib1 -P 1 NR > "$W/saquery.nr" 2>&1; st=$?
  show "saquery -C sib1 NR" "$W/saquery.nr"
  check "the SA (opensm's, asked from sib1 over QP1) lists both nodes (exit $st)" \
    bash -c "[ $st = 0 ] && grep -qi 'node_guid.*0x0200005349420000' '$W/saquery.nr' && grep -qi 'node_guid.*0x0200005349420100' '$W/saquery.nr'"
  timeout 60 sminfo -C sib1 -P 1 > "$W/sminfo" 2>&1; st=$?
  show sminfo "$W/sminfo"
  check "sminfo from sib1: the master SM is sib0's port (exit $st)" \
    bash -c "[ $st = 0 ] && grep -Eq 'sm lid $l0 sm guid 0x0*${OSM_GUID#0x0}' '$W/sminfo' && grep -q 'SMINFO_MASTER' '$W/sminfo'"
  # The data path on the SM's LIDs.
  ibv_ud_pingpong -d sib1 -n 100 -s 512 > "$W/udpp3.server" 2>&1 &
  srv=$!
  wait_until 10 tcp_listening 18515
  timeout 60 ibv_ud_pingpong -d sib0 -n 100 -s 512 127.0.0.1 > "$W/udpp3.client" 2>&1; cst=$?
  wait "$srv"; sst=$?
  show "ibv_ud_pingpong (SM's LIDs) client" "$W/udpp3.client"
  check "ibv_ud_pingpong sib0 -> sib1 on the SM's LIDs (exit $cst, $sst)" \
    bash -c "[ $cst = 0 ] && [ $sst = 0 ] && grep -q 'LID 0x$(printf %04x $l1)' '$W/udpp3.client'"
  # IP over InfiniBand on both ports, ib1 in a network namespace of its
  # own (so that IP between 10.77.0.1 and 10.77.0.2 crosses the cable),
  # then rdma_cm's and rsverbs' multicast memberships through opensm's SA.
  NS=sibns
  ipoib=0
  if ipoib_up > "$W/ipoib.err" 2>&1; then
    ipoib=1
    pass "IPoIB: ib0 (sib0) 10.77.0.1, ib1 (sib1) 10.77.0.2 in a namespace of its own"
    check "IPoIB: both ports joined the broadcast group at the SA (two MCMemberRecords of ff12:401b:ffff::ffff:ffff)" \
      wait_until 30 records_are ff12:401b:ffff::ffff:ffff 2
    ip netns exec $NS ibv_ud_pingpong -d sib1 -n 50 > "$W/udpp4.server" 2>&1 &
    srv=$!
    wait_until 10 tcp_listening 18515 "$srv"
    timeout 60 ibv_ud_pingpong -d sib0 -n 50 10.77.0.2 > "$W/udpp4.client" 2>&1; cst=$?
    wait "$srv"; sst=$?
    check "IP over InfiniBand: ibv_ud_pingpong's TCP exchange to 10.77.0.2 (ARP on the broadcast group, unicast on the SA's path), then 50 iterations (exit $cst, $sst)" \
      bash -c "[ $cst = 0 ] && [ $sst = 0 ]"
    check "ping across the cable: 10.77.0.1 (ib0) -> 10.77.0.2 (ib1, another namespace)" \
      bash -c "ping -c 3 -W 5 10.77.0.2 > '$W/ping' 2>&1"
    show ping "$W/ping"
    saquery -C sib0 -g > "$W/saquery.g" 2>&1
    show "saquery -g" "$W/saquery.g"
    check "saquery -g lists the IPoIB broadcast group" grep -q 'MGID.*ff12:401b:ffff::ffff:ffff' "$W/saquery.g"
    # rdma_cm's own multicast on InfiniBand: mckey joins through the SA on
    # both ports, 5 datagrams cross the cable to the MLID the SA chose (the
    # receiver ends only when it has all 5).
    mckey_pair() { # TAG "RECEIVER ARGS" "SENDER ARGS" WHAT
      ip netns exec $NS stdbuf -oL timeout 60 mckey -b 10.77.0.2 $2 -C 5 > "$W/mckey.$1.recv" 2>&1 &
      local mr=$! rst sst
      wait_until 20 grep -q 'receiving data transfers' "$W/mckey.$1.recv"
      timeout 60 mckey -b 10.77.0.1 $3 -s -C 5 > "$W/mckey.$1.send" 2>&1; sst=$?
      wait "$mr"; rst=$?
      show "mckey $2 (receiver, sib1)" "$W/mckey.$1.recv"; show "mckey $3 -s (sender, sib0)" "$W/mckey.$1.send"
      check "mckey on InfiniBand, $4: the receiver on sib1 got the sender's 5 datagrams (exit $rst, $sst)" \
        bash -c "[ $rst = 0 ] && [ $sst = 0 ] && grep -q 'data transfers complete' '$W/mckey.$1.recv'"
    }
    mckey_pair m "-m 239.77.8.8" "-m 239.77.8.8" "-m (IPv4 group, both full members)"
    check "mckey -m: both joined ff12:4001:ffff::f4d:808 with the same MLID from the SA" \
      bash -c "m=\$(grep -ho 'joined dgid: ff12:4001:ffff::f4d:808 mlid 0x[0-9a-f]*' '$W/mckey.m.recv' '$W/mckey.m.send' | sort -u); [ \$(echo \"\$m\" | wc -l) = 1 ] && [ -n \"\$m\" ]"
    mckey_pair M "-M ff12:4001:ffff::f4d:e0e" "-M ff12:4001:ffff::f4d:e0e" "-M (an MGID, AF_IB)"
    mckey_pair o "-m 239.77.14.14" "-m 239.77.14.14 -o" "-o (the sender a send-only full member)"
    # rsverbs' explicit membership (rsverbs_mcast_join) beside librdmacm's
    # on the same port: the same answers at every step, full and send-only.
    ip netns exec $NS timeout 60 "$BIN/member" sib1 ib1 10.77.0.2 seq rdmacm > "$W/seq.rdmacm" 2>&1
    ip netns exec $NS env LD_PRELOAD="$RSVERBS_LIB" RSVERBS_TRACE=1 timeout 60 "$BIN/member" sib1 ib1 10.77.0.2 seq rsverbs > "$W/seq.rsverbs" 2>&1
    show "member seq rdmacm" "$W/seq.rdmacm"; show "member seq rsverbs" "$W/seq.rsverbs"
    check "explicit membership on InfiniBand: librdmacm's 9 steps ran" [ "$(grep -c '^step' "$W/seq.rdmacm")" = 9 ]
    check "explicit membership on InfiniBand: rsverbs_mcast_join/leave give librdmacm's answers at each step (full and send-only, through opensm's SA)" \
      diff <(grep '^step' "$W/seq.rdmacm") <(grep '^step' "$W/seq.rsverbs")
    check "rsverbs' trace names the SA's MLID and the group's Q_Key (rdma_cm's 0x01234567)" \
      grep -Eq 'fabricjoin joined netdev=ib1 .* mgid=ff12:4001:ffff::f4d:501 .*mlid=0xc[0-9a-f]{3} qkey=0x01234567' "$W/seq.rsverbs"
    # The SA's records while rsverbs holds a send-only membership, and after.
    for kind in sendonly full; do
      coproc HOLD { exec ip netns exec $NS env LD_PRELOAD="$RSVERBS_LIB" "$BIN/member" sib1 ib1 10.77.0.2 hold $kind rsverbs 239.77.9.9 2>&1; }
      held=0
      while read -r -t 30 l <&"${HOLD[0]}"; do [ "$l" = held ] && { held=1; break; }; done
      saquery --smkey 1 -C sib0 -m > "$W/sa.$kind" 2>&1
      want=$([ $kind = sendonly ] && echo 0x28 || echo 0x21)
      check "rsverbs holds a $kind membership of 239.77.9.9: the SA has sib1's MCMemberRecord of ff12:4001:ffff::f4d:909, JoinState $((want & 0xf)) (ScopeState $want)" \
        bash -c "[ $held = 1 ] && grep -A4 'MGID\.*ff12:4001:ffff::f4d:909\$' '$W/sa.$kind' | grep -q 'PortGid\.*fe80::200:53:4942:101\$' &&
          grep -A4 'MGID\.*ff12:4001:ffff::f4d:909\$' '$W/sa.$kind' | grep -q 'ScopeState\.*$want\$'"
      echo >&"${HOLD[1]}" 2>/dev/null; wait "$HOLD_PID" 2>/dev/null
      check "after rsverbs' $kind leave the SA holds no record of ff12:4001:ffff::f4d:909" wait_until 10 records_are ff12:4001:ffff::f4d:909 0
    done
    # On InfiniBand an MGID must start with 0xff (the SA refuses any
    # other): RoCE's ::ffff:a.b.c.d form of an IPv4 group is EINVAL at
    # once, without asking the SA (no fabricjoin line in the trace).
    ip netns exec $NS env LD_PRELOAD="$RSVERBS_LIB" RSVERBS_TRACE=1 "$BIN/member" sib1 ib1 10.77.0.2 raw rsverbs ::ffff:239.77.5.1 > "$W/raw.v4" 2>&1
    show "member raw ::ffff:239.77.5.1" "$W/raw.v4"
    check "rsverbs_mcast_join of ::ffff:239.77.5.1 on InfiniBand: EINVAL, without a join sent to the SA" \
      bash -c "grep -q '^step raw-join rc=-1 errno=22 ' '$W/raw.v4' && ! grep -q fabricjoin '$W/raw.v4'"
    # The fabric join after an attach (RSVERBS_MCAST_FABRICJOIN=1): a
    # receiver that only attaches, through rsverbs, on sib1 (sibdata recv).
    # A librdmacm member on sib0 keeps the group, and its MLID, in place.
    G=239.77.10.10 GM=ff12:4001:ffff::f4d:a0a
    keep_group $G
    mlid=$(sa_mlid $GM)
    check "librdmacm holds $G on sib0: the SA has $GM with an MLID (0x$mlid)" bash -c "[ $kept = 1 ] && [ -n '$mlid' ]"
    # rsverbs doctor on InfiniBand: ready for the group librdmacm holds on
    # sib0 (the SA's record of this port, its MLID and Q_Key), not ready
    # (exit 1) for a group nobody joined, and not ready on sib1 (in its
    # namespace, with ib1), which the SA does not count as a member.
    doctor() { # TAG GROUP DEV [NETNS]: text and --json, with their exit statuses
      local pre=(); [ -z "${4:-}" ] || pre=(ip netns exec "$4")
      "${pre[@]}" "$T" doctor "$2" --dev "$3" > "$W/doctor.$1" 2>&1; echo $? > "$W/doctor.$1.rc"
      "${pre[@]}" "$T" doctor "$2" --dev "$3" --json > "$W/doctor.$1.json" 2>&1; echo $? > "$W/doctor.$1.json.rc"
      show "rsverbs doctor $2 --dev $3" "$W/doctor.$1"
    }
    doctor_rc() { [ "$(cat "$W/doctor.$1.rc")" = "$2" ] && [ "$(cat "$W/doctor.$1.json.rc")" = "$2" ]; } # TAG STATUS: text's and JSON's
    said() { grep -Eq "$2" "$W/doctor.$1"; } # TAG REGEX: a line of the text
    fails() { [ "$(grep -c '^  FAIL' "$W/doctor.$1")" = "$2" ]; } # TAG N: N checks say FAIL
    json_says() { # TAG PYTHON-EXPRESSION over d (the object), p (its port), c (its checks by name)
      python3 -c "import json,sys; d=json.load(open(sys.argv[1])); p=d['ports'][0]; c={x['name']: x for x in p['checks']}; sys.exit(0 if ($2) else 1)" "$W/doctor.$1.json"
    }
    if [ ! -x "$T" ]; then
      fail "rsverbs doctor: no tool binary at $T"
    else
      doctor held $G sib0
      doctor nobody 239.77.99.99 sib0
      doctor other $G sib1 $NS
      check "doctor $G --dev sib0 (librdmacm holds it there): ready, exit 0 (text and --json)" doctor_rc held 0
      check "... the verdict: ready, nothing failed or skipped" said held '^  => ready$'
      check "... port ok: ACTIVE with an SM LID" said held '^  ok +port +ACTIVE, link layer InfiniBand, LID 0x[0-9a-f]+, SM LID 0x[1-9a-f][0-9a-f]*$'
      check "... ipoib ok: ib0, found by the port GID, with 10.77.0.1" said held '^  ok +ipoib +ib0, operstate up, IPv4 10\.77\.0\.1$'
      check "... pkey ok: 0xffff at index 0, a full member" said held '^  ok +pkey +P_Key 0xffff at index 0: a full member'
      check "... mgid ok: $GM, from ib0's broadcast address" said held "^  ok +mgid +$GM: rdma_cm's for $G on ib0"
      check "... membership ok: the SA's record of this port, MLID 0x$mlid and rdma_cm's Q_Key 0x1234567" \
        said held "^  ok +membership +the SA has this port's MCMemberRecord of $GM: MLID 0x0*$mlid, Q_Key 0x1234567, the Q_Key a sender must use"
      check "... --json: ready, sa.member true with the SA's MLID and Q_Key" json_says held \
        "d['ready'] and p['ready'] and p['link_layer'] == 'InfiniBand' and p['skipped'] == 0 and p['netdev'] == 'ib0' and p['sa'] == {'mgid': '$GM', 'member': True, 'mlid': 0x$mlid, 'qkey': 0x01234567} and c['membership']['status'] == 'ok'"
      check "doctor 239.77.99.99 --dev sib0 (nobody joined): not ready, exit 1 (text and --json)" doctor_rc nobody 1
      check "... membership FAIL: the SA has no record of ff12:4001:ffff::f4d:6363" \
        said nobody '^  FAIL +membership +the SA has no MCMemberRecord of ff12:4001:ffff::f4d:6363: nobody has joined'
      check "... the fix names the fabric join" said nobody '^        fix: RSVERBS_MCAST_FABRICJOIN=1 PROGRAM'
      check "... membership is the one check that fails" fails nobody 1
      check "... --json: sa.member false, no MLID" json_says nobody \
        "not d['ready'] and p['sa'] == {'mgid': 'ff12:4001:ffff::f4d:6363', 'member': False, 'mlid': None, 'qkey': None} and c['membership']['status'] == 'fail' and len(c['membership']['fix']) == 3"
      check "doctor $G --dev sib1 in $NS (the SA has the group, not from sib1): not ready, exit 1" doctor_rc other 1
      check "... membership FAIL: the group's MLID and Q_Key, sib1 not a member" \
        said other "^  FAIL +membership +the SA has $GM \(MLID 0x0*$mlid, Q_Key 0x1234567\), but sib1 port 1 .* is not a member"
      check "... ipoib ok: ib1 in the namespace" said other '^  ok +ipoib +ib1, operstate up, IPv4 10\.77\.0\.2$'
      check "... membership is the one check that fails" fails other 1
      check "... --json: sa.member false with the group's MLID" json_says other \
        "not d['ready'] and p['sa']['member'] is False and p['sa']['mlid'] == 0x$mlid and c['membership']['status'] == 'fail'"
    fi
    # rsverbs selftest on InfiniBand: the GID cases and attach and detach
    # with multicast LIDs through rdma-core and rsverbs, and --join of a
    # group nobody else holds: full and send-only memberships at the SA
    # through librdmacm and through rsverbs, step by step.
    if [ -x "$T" ]; then
      start=$SECONDS
      "$T" selftest sib0 --join 239.77.12.12 > "$W/selftest.sib0" 2>&1; rc=$?
      show "rsverbs selftest sib0 --join 239.77.12.12 ($((SECONDS - start)) s)" "$W/selftest.sib0"
      check "selftest sib0 --join 239.77.12.12 on InfiniBand: exit 0, every answer rdma-core's and librdmacm's (got $rc)" [ $rc = 0 ]
      check "... port 1 (InfiniBand) and the table reported, 0 different" \
        bash -c "grep -Eq '^  port 1 \(InfiniBand\): [0-9]+ cases, [0-9]+ identical, 0 different' '$W/selftest.sib0' &&
          grep -Eq '^  all ports \(_ibv_query_gid_table\): [0-9]+ cases, [0-9]+ identical, 0 different' '$W/selftest.sib0'"
      check "... the 9 join steps at the SA, librdmacm's answers and rsverbs' the same" \
        test "$(grep -c '^    --join 239.77.12.12: [a-z].*: ret=' "$W/selftest.sib0")" -eq 9
      check "... a send-only join and a full one beside it succeed" \
        bash -c "grep -qx '    --join 239.77.12.12: join send-only: ret=0 errno=0' '$W/selftest.sib0' && grep -qx '    --join 239.77.12.12: join full beside it: ret=0 errno=0' '$W/selftest.sib0'"
      check "... its fds as before the run" grep -q '^fds          as before the run' "$W/selftest.sib0"
    fi
    recv() { # TAG LID QKEY COUNT: sibdata recv on sib1, preloaded, FABRICJOIN on, hints on
      ip netns exec $NS env LD_PRELOAD="$RSVERBS_LIB" RSVERBS_MCAST_FABRICJOIN=1 RSVERBS_TRACE=hints \
        "$W/sibdata" recv sib1 $GM "$2" "$3" "$4" > "$W/recv.$1" 2>&1
    }
    # Attached with another LID than the SA's: joined, and the hint names the SA's.
    recv lid 0xc0ff 0x01234567 0
    show "recv (LID 0xc0ff)" "$W/recv.lid"
    check "FABRICJOIN=1 after an attach on InfiniBand: rsverbs joined $GM through the SA, its MLID 0x$mlid and rdma_cm's Q_Key" \
      grep -Eq "fabricjoin joined netdev=ib1 .*mgid=$GM .*mlid=0x0*$mlid qkey=0x01234567" "$W/recv.lid"
    check "... attached with LID 0xc0ff: hint[mlid-mismatch] names the SA's MLID" grep -Eq "hint\[mlid-mismatch\]: .*0xc0ff.*0x0*$mlid" "$W/recv.lid"
    # Another Q_Key than the group's: hint[qkey-mismatch].
    recv qkey 0x$mlid 0x11111111 0
    show "recv (Q_Key 0x11111111)" "$W/recv.qkey"
    check "... a QP Q_Key other than the group's: hint[qkey-mismatch]" grep -q "hint\[qkey-mismatch\]" "$W/recv.qkey"
    check "... and its twin with the SA's MLID: no hint[mlid-mismatch]" bash -c "! grep -q 'hint\[mlid-mismatch\]' '$W/recv.qkey'"
    # The SA's MLID and the group's Q_Key: no hint, and mckey's datagrams from sib0 arrive, each once.
    ip netns exec $NS env LD_PRELOAD="$RSVERBS_LIB" RSVERBS_MCAST_FABRICJOIN=1 RSVERBS_TRACE=hints \
      "$W/sibdata" recv sib1 $GM 0x$mlid 0x01234567 5 > "$W/recv.ok" 2>&1 &
    rp=$!
    wait_until 20 grep -q '^ready' "$W/recv.ok"
    timeout 60 mckey -b 10.77.0.1 -m $G -s -C 5 > "$W/mckey.send2" 2>&1; sst=$?
    wait "$rp"; rst=$?
    show "recv (the SA's MLID)" "$W/recv.ok"; show "mckey -s" "$W/mckey.send2"
    check "a receiver that only attaches (rsverbs, FABRICJOIN=1) got mckey's 5 datagrams from sib0 (exit $rst, $sst)" \
      bash -c "[ $rst = 0 ] && [ $sst = 0 ] && grep -qx 'done 5' '$W/recv.ok'"
    check "... with no hint: the SA's MLID, the group's Q_Key" bash -c "! grep -q 'hint\[' '$W/recv.ok'"
    # hint[no-ipoib]: the same receiver on sib0 in a network namespace of
    # its own, where no IPoIB netdev of the port is (rdma_cm joins only from
    # one); its twin above, in the namespace of ib1, is silent.
    ip netns add sibnoipoib 2>/dev/null
    ip netns exec sibnoipoib env LD_PRELOAD="$RSVERBS_LIB" RSVERBS_MCAST_FABRICJOIN=1 RSVERBS_TRACE=hints \
      "$W/sibdata" recv sib0 $GM 0x$mlid 0x01234567 0 > "$W/recv.noipoib" 2>&1
    show "recv (sib0, a namespace without IPoIB)" "$W/recv.noipoib"
    check "FABRICJOIN=1 on an InfiniBand port without an IPoIB netdev in reach: hint[no-ipoib] names the device and port" \
      grep -Eq "hint\[no-ipoib\]: RSVERBS_MCAST_FABRICJOIN cannot join $GM from sib0 port 1" "$W/recv.noipoib"
    check "... and its twin with ib1 in reach: no hint[no-ipoib]" bash -c "! grep -q 'hint\[no-ipoib\]' '$W/recv.ok'"
    ip netns del sibnoipoib 2>/dev/null
    # hint[fabric-join-failed]: a join the SA refuses. IPoIB's broadcast
    # group ff12:401b:ffff::ffff:ffff exists with the Q_Key the SM gave it
    # (saquery -g above); rdma_cm joins with its own, RDMA_UDP_QKEY, and the
    # SA answers the mismatch with an error status (an event with EINVAL).
    ip netns exec $NS env LD_PRELOAD="$RSVERBS_LIB" RSVERBS_MCAST_FABRICJOIN=1 RSVERBS_TRACE=hints \
      "$W/sibdata" recv sib1 ff12:401b:ffff::ffff:ffff 0xc000 0x01234567 0 > "$W/recv.refused" 2>&1
    show "recv (IPoIB's broadcast MGID)" "$W/recv.refused"
    check "FABRICJOIN=1 of a group the SA refuses on InfiniBand: the join's event EINVAL, hint[fabric-join-failed]" \
      bash -c "grep -q 'fabricjoin join netdev=ib1 .*mgid=ff12:401b:ffff::ffff:ffff .*step=event result=EINVAL(22)' '$W/recv.refused' &&
        grep -q 'hint\[fabric-join-failed\]: RSVERBS_MCAST_FABRICJOIN could not join .* through ib1: EINVAL(22) at event (the SA refused the record' '$W/recv.refused'"
    check "... and the twins that joined: no hint[fabric-join-failed]" bash -c "! grep -q 'hint\[fabric-join-failed\]' '$W/recv.ok' '$W/recv.lid' '$W/recv.qkey'"
    keep_release
  else
    fail "IPoIB setup: $(cat "$W/ipoib.err")"
  fi
  # An SM restart: its first sweep as master sets ClientReregister on
  # every port that advertises it (osm_lid_mgr.c); sib raises the event.
  stdbuf -oL ibv_asyncwatch -d sib1 > "$W/asyncwatch.sib1" 2>&1 &
  aw=$!
  # Ready once it holds sib1's uverbs device open (its async fd is that).
  wait_until 10 bash -c "ls -l /proc/$aw/fd 2>/dev/null | grep -q /dev/infiniband/uverbs1"
  # rsverbs holds a full membership across the restart (with IPoIB up).
  RG=239.77.12.12 RGM=ff12:4001:ffff::f4d:c0c
  if [ "$ipoib" = 1 ]; then
    coproc RHOLD { exec ip netns exec $NS env LD_PRELOAD="$RSVERBS_LIB" RSVERBS_TRACE=1 "$BIN/member" sib1 ib1 10.77.0.2 hold full rsverbs $RG 2>&1; }
    exec {rh_out}<&"${RHOLD[0]}" {rh_in}>&"${RHOLD[1]}"
    rheld() { # the holder's lines until "held", into $W/rhold (30 s at most)
      local l; while read -r -t 30 l <&$rh_out; do echo "$l" >> "$W/rhold"; [ "$l" = held ] && return 0; done; return 1
    }
    rheld > /dev/null
    check "rsverbs holds $RG before the restart: the SA has sib1's record of $RGM" wait_until 10 records_are $RGM 1
  fi
  # librdmacm's own listener across the restart: mckey waiting for more
  # than will ever come must get RDMA_CM_EVENT_MULTICAST_ERROR.
  if [ "$ipoib" = 1 ]; then
    ip netns exec $NS stdbuf -oL mckey -b 10.77.0.2 -m 239.77.13.13 -C 1000 > "$W/mckey.restart" 2>&1 &
    mrr=$!
    wait_until 20 grep -q 'receiving data transfers' "$W/mckey.restart"
  fi
  osm_stop
  osm_start "$W/opensm2.log"
  if wait_until 120 grep -q 'CLIENT_REREGISTER' "$W/asyncwatch.sib1"; then
    pass "an opensm restart: sib1 raises IBV_EVENT_CLIENT_REREGISTER (ibv_asyncwatch)"
  else
    fail "an opensm restart: no IBV_EVENT_CLIENT_REREGISTER on sib1"
  fi
  check "both ports still ACTIVE after the restart" wait_until 60 both_active
  if [ "$ipoib" = 1 ]; then
    # The kernel's multicast module has handled the re-register once IPoIB
    # is back in its broadcast group at the new SA (both ports); the new
    # SA knows nothing of rsverbs' group until rsverbs joins it again.
    check "after the restart IPoIB joined the broadcast group again (both ports)" \
      wait_until 60 records_are ff12:401b:ffff::ffff:ffff 2
    check "after the restart the listening mckey got RDMA_CM_EVENT_MULTICAST_ERROR" wait_until 30 grep -q 'MULTICAST_ERROR' "$W/mckey.restart"
    kill "$mrr" 2>/dev/null; wait "$mrr" 2>/dev/null
    show "mckey (listening across the restart)" "$W/mckey.restart"
    check "after the restart the new SA has no record of $RGM (the membership was lost with it)" \
      records_are $RGM 0
    # The holder's next call (one more join of the group) reads the loss
    # (-ENETRESET) and joins again, in that one call.
    echo again >&$rh_in
    rheld > /dev/null
    show "member hold (rsverbs) across the restart" "$W/rhold"
    check "rsverbs' next call after the re-register: the loss traced (ENETRESET) and the group joined again, in that call" \
      bash -c "grep -q 'fabricjoin lost netdev=ib1 .*mgid=$RGM .*ENETRESET' '$W/rhold' && grep -q '^step join-again rc=0 ' '$W/rhold' &&
        [ \$(grep -c 'fabricjoin joined netdev=ib1 .*mgid=$RGM' '$W/rhold') = 2 ]"
    check "... and the new SA has sib1's record of $RGM again" wait_until 10 records_are $RGM 1
    echo >&$rh_in; wait "$RHOLD_PID" 2>/dev/null
  fi
  # The cable pulled (the test hook) and plugged again: DOWN with PORT_ERR,
  # then the SM's next sweep brings the ports back to ACTIVE.
  n_act=$(grep -c 'PORT_ACTIVE' "$W/asyncwatch.sib1")
  echo 0 > /sys/module/sib/parameters/cable
  check "cable pulled: both ports DOWN, phys state Polling" bash -c \
    "[ \"\$(cat $S/sib0/ports/1/state $S/sib1/ports/1/state $S/sib1/ports/1/phys_state | tr '\n' ' ')\" = '1: DOWN 1: DOWN 2: Polling ' ]"
  check "cable pulled: sib1 raises IBV_EVENT_PORT_ERR" wait_until 30 grep -q 'PORT_ERR' "$W/asyncwatch.sib1"
  echo 1 > /sys/module/sib/parameters/cable
  if wait_until 120 both_active; then pass "cable plugged again: opensm brought both ports back to ACTIVE"; else fail "cable plugged again: not ACTIVE: $(cat $S/sib0/ports/1/state $S/sib1/ports/1/state | tr '\n' ' ')"; fi
  check "... and sib1 raised IBV_EVENT_PORT_ACTIVE again" \
    wait_until 30 bash -c "[ \$(grep -c PORT_ACTIVE '$W/asyncwatch.sib1') -gt $n_act ]"
  show "ibv_asyncwatch -d sib1" "$W/asyncwatch.sib1"
  kill "$aw" 2>/dev/null; wait "$aw" 2>/dev/null
  osm_stop
  tail -n 20 "$W/opensm.log" > "$W/opensm.tail" 2>/dev/null; show "opensm.log (tail)" "$W/opensm.tail"
  sib_unload "after opensm" "$dmesg_at" dmesg.sib3
fi
osm_stop

mkdir -p "$RESULTS_DIR/sib" && cp "$W"/* "$RESULTS_DIR/sib/" 2>/dev/null
rm -rf "$W"
finish
