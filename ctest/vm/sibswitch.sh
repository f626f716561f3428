#!/usr/bin/env bash
# sib with its emulated switch (testbed/sib/sib.c, insmod sib.ko switch=1):
# sib0's port on the switch's port 1, sib1's on its port 2. Run after
# ctest/vm/sib.sh in the same boot (make check-sib). opensm on sib0 brings
# both CA ports and the switch's ports ACTIVE; ibnetdiscover sees 1 switch
# and 2 CAs; ibroute dumps the LFT the SM programmed (both CA LIDs) and,
# once a librdmacm member holds a group, the MFT with the member's port.
# Then the switch's rule that back to back could not show: a receiver on
# sib1 that only attaches (sibdata recv, rdma-core alone) gets none of
# mckey's datagrams from sib0 while nobody on sib1 joined (the switch drops
# them: counted in switch_drops), and its twin with the fabric join
# (librsverbs.so.1, RSVERBS_MCAST_FABRICJOIN=1) gets all 5; rsverbs doctor
# says not ready before the join and ready during it. Last, perftest's
# ib_send_bw and ib_send_lat -c UD --mcg (their own SA join) through the
# switch, with rdma-core alone and with rsverbs preloaded.
#
#   RSVERBS_SIB=1 RSVERBS_SUITES=sibswitch testbed/vm.sh run -- bash ctest/guest_suite.sh
set -uo pipefail
export RESULTS_DIR=${RESULTS_DIR:-${RSVERBS_OUT:-$(cd "$(dirname "$0")/.." && pwd)/out}}
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/sib.bash"
W=$(mktemp -d)
P=/sys/module/sib/parameters
BIN=${BIN:-$ROOT/ctest/out/bin}

if [ "${RSVERBS_SIB:-0}" != 1 ]; then
  echo "sibswitch: not run: this boot has no sib (RSVERBS_SIB=1 loads it)"
  rm -f "$RESULTS_DIR/$SUITE.results"; rm -rf "$W"; exit 0
fi
SW_GUID=0x0200005349420f00
# sw_port_state N: the switch's port N's PortInfo LinkState, asked by a
# directed route from sib0 (0,1: out of sib0's port 1, the switch).
sw_port_state() { smpquery -C sib0 -P 1 -D portinfo 0,1 "$1" 2>/dev/null | sed -n 's/^LinkState:\.*//p'; }
sw_active() { [ "$(sw_port_state 1)" = Active ] && [ "$(sw_port_state 2)" = Active ]; }
drops() { cat $P/switch_drops; }

dmesg_at=$(dmesg | wc -l)
if ! command -v opensm > /dev/null || ! command -v ibroute > /dev/null; then
  fail "no opensm or infiniband-diags in this userland"
elif ! { ! lsmod | grep -q '^sib ' || rmmod sib; } || ! /run/rsverbs/modprobe ib_umad 2> "$W/modprobe.err" ||
  ! insmod $KO switch=1 2> "$W/insmod.err" || ! wait_until 10 test -d $S/sib1; then
  fail "insmod sib switch=1: $(cat "$W/modprobe.err" "$W/insmod.err" 2>/dev/null)"
else
  pass "insmod sib switch=1"
  check "switch=1 reads back 1, switch_drops 0" [ "$(cat $P/switch) $(drops)" = "Y 0" ]
  osm_start "$W/opensm.log"
  if wait_until 120 both_active; then pass "opensm through the switch: sib0 and sib1 ACTIVE"; else fail "opensm: sib0 and sib1 not ACTIVE: $(cat $S/sib0/ports/1/state $S/sib1/ports/1/state | tr '\n' ' ')"; fi
  check "opensm through the switch: the switch's ports 1 and 2 ACTIVE (PortInfo by directed route 0,1)" wait_until 60 sw_active
  smpquery -C sib0 -P 1 -D nodeinfo 0,1 > "$W/sw.nodeinfo" 2>&1; show "smpquery nodeinfo 0,1" "$W/sw.nodeinfo"
  check "the node at 0,1 is a switch with 2 ports, GUID $SW_GUID, entered by its port 1" bash -c \
    "grep -q '^NodeType:.*Switch' '$W/sw.nodeinfo' && grep -q '^NumPorts:\.*2$' '$W/sw.nodeinfo' && grep -q '^Guid:\.*$SW_GUID$' '$W/sw.nodeinfo' && grep -q '^LocalPort:\.*1$' '$W/sw.nodeinfo'"
  l0=$(($(cat $S/sib0/ports/1/lid))); l1=$(($(cat $S/sib1/ports/1/lid)))
  timeout 60 ibnetdiscover -C sib0 -P 1 > "$W/ibnetdiscover" 2>&1; st=$?
  show ibnetdiscover "$W/ibnetdiscover"
  check "ibnetdiscover: 1 switch and 2 CAs (exit $st)" bash -c \
    "[ $st = 0 ] && [ \$(grep -c '^Switch' '$W/ibnetdiscover') = 1 ] && [ \$(grep -c '^Ca' '$W/ibnetdiscover') = 2 ]"
  swlid=$(sed -n 's/^Switch.*base port 0 lid \([0-9]*\).*/\1/p' "$W/ibnetdiscover" | head -1)
  check "ibnetdiscover: sib0 on the switch's port 1, sib1 on its port 2" bash -c \
    "grep -Eq '^\[1\].*\"H-0200005349420000\"\[1\]' '$W/ibnetdiscover' && grep -Eq '^\[2\].*\"H-0200005349420100\"\[1\]' '$W/ibnetdiscover'"
  check "the switch has a LID of its own (${swlid:-none}), not a CA's ($l0, $l1)" \
    bash -c "[ -n '$swlid' ] && [ '$swlid' != $l0 ] && [ '$swlid' != $l1 ]"
  timeout 60 ibroute -C sib0 -P 1 "${swlid:-0}" > "$W/ibroute" 2>&1; st=$?
  show "ibroute $swlid" "$W/ibroute"
  check "ibroute (LID-routed SMPs to the switch's LID): the LFT sends sib0's LID $l0 out of port 1, sib1's $l1 out of port 2 (exit $st)" \
    bash -c "[ $st = 0 ] && grep -Eq '^$(printf 0x%04x $l0) 001 ' '$W/ibroute' && grep -Eq '^$(printf 0x%04x $l1) 002 ' '$W/ibroute'"
  timeout 60 ibv_ud_pingpong -d sib1 -n 100 -s 512 > "$W/udpp.server" 2>&1 &
  srv=$!
  wait_until 10 tcp_listening 18515
  timeout 60 ibv_ud_pingpong -d sib0 -n 100 -s 512 127.0.0.1 > "$W/udpp.client" 2>&1; cst=$?
  wait "$srv"; sst=$?
  check "ibv_ud_pingpong sib0 -> sib1 through the switch's LFT (exit $cst, $sst)" bash -c "[ $cst = 0 ] && [ $sst = 0 ]"

  # IPoIB (ib1 in a namespace of its own), then multicast by the MFT.
  NS=sibswns
  if ipoib_up > "$W/ipoib.err" 2>&1; then
    pass "IPoIB: ib0 (sib0) 10.77.0.1, ib1 (sib1) 10.77.0.2"
    check "IPoIB ping across the switch (the broadcast group's MFT: ARP)" wait_until 60 ping -c 1 -W 2 10.77.0.2
    # mft_ports MLID: the ports ibroute -M marks for MLID (its columns:
    # two characters a port, "x " where the mask has it), e.g. "1 2";
    # empty when the MFT has no port for it; "error" when ibroute fails.
    mft_ports() {
      local d m p out=
      d=$(timeout 30 ibroute -C sib0 -P 1 -M "$swlid" 2>/dev/null) || { echo error; return; }
      m=$(sed -n "s/^0x$1 \{6\}//p" <<< "$d" | head -1)
      for p in 0 1 2; do [ "${m:$((2 * p)):1}" = x ] && out="$out${out:+ }$p"; done
      echo "$out"
    }
    mft_is() { [ "$(mft_ports "$1")" = "$2" ]; }
    G=239.77.20.20 GM=ff12:4001:ffff::f4d:1414
    keep_group $G
    mlid=$(sa_mlid $GM)
    check "librdmacm holds $G on sib0: the SA has $GM with an MLID (0x$mlid)" bash -c "[ $kept = 1 ] && [ -n '$mlid' ]"
    mlid=$(printf %04x "0x${mlid:-0}")
    # opensm programs no MFT entry for a group whose members are all
    # behind one switch port: there is nothing to forward (seen here).
    check "ibroute -M: sib0 the only member (behind port 1): the MFT names no port for 0x$mlid" mft_is "$mlid" ""
    check "ibroute -M: the IPoIB broadcast group (both ports members): the MFT sends 0xc000 to ports 1 and 2" mft_is c000 "1 2"
    timeout 30 ibroute -C sib0 -P 1 -M "$swlid" > "$W/ibroute.M" 2>&1; show "ibroute -M $swlid" "$W/ibroute.M"
    if ! cc -O2 -Wall -Werror -o "$W/sibdata" "$ROOT/testbed/sib/sibdata.c" -libverbs 2> "$W/cc.err"; then
      fail "sibdata.c does not build: $(cat "$W/cc.err")"
    else
      # rsverbs doctor on sib1 (in its namespace): not ready, the SA has the
      # group but not sib1 as a member; the fix is the join.
      ip netns exec $NS "$T" doctor $G --dev sib1 > "$W/doctor.before" 2>&1; dst=$?
      show "rsverbs doctor $G --dev sib1 (nobody on sib1 joined)" "$W/doctor.before"
      check "rsverbs doctor on sib1 before the join: not ready (exit $dst), membership FAIL with the join as its fix" \
        bash -c "[ $dst = 1 ] && grep -Eq '^  FAIL +membership ' '$W/doctor.before' && grep -q 'fix: RSVERBS_MCAST_FABRICJOIN=1' '$W/doctor.before'"
      # The receiver on sib1 that only attaches: nobody on sib1 joined,
      # the MFT names port 1 alone, the switch drops mckey's 5 datagrams
      # (they came in by port 1) and counts them.
      # mckey_send NAME: mckey -s on sib0 sends 5 datagrams of $G (its own
      # join first), its output in $W/mckey.NAME, its exit status in $sst.
      mckey_send() { timeout 60 mckey -b 10.77.0.1 -m $G -s -C 5 > "$W/mckey.$1" 2>&1; sst=$?; }
      d0=$(drops)
      ip netns exec $NS "$W/sibdata" recv sib1 $GM 0x$mlid 0x01234567 5 > "$W/recv.attach" 2>&1 &
      rp=$!
      wait_until 20 grep -q '^ready' "$W/recv.attach"
      mckey_send send1
      check "... mckey -s from sib0 sent its 5 (exit $sst)" [ $sst = 0 ]
      check "... and the switch dropped them: switch_drops rose by 5 or more (from $d0)" \
        wait_until 10 bash -c "[ \$(cat $P/switch_drops) -ge $((d0 + 5)) ]"
      wait "$rp"
      show "recv (attach only)" "$W/recv.attach"; show "mckey -s" "$W/mckey.send1"
      check "a receiver on sib1 that only attaches (no join at the SA) got 0 of mckey's datagrams through the switch" \
        grep -qx 'done 0' "$W/recv.attach"
      # Its twin with the fabric join: port 2 enters the MFT, all 5 arrive.
      ip netns exec $NS env LD_PRELOAD="$RSVERBS_LIB" RSVERBS_MCAST_FABRICJOIN=1 RSVERBS_TRACE=1 \
        "$W/sibdata" recv sib1 $GM 0x$mlid 0x01234567 5 > "$W/recv.join" 2>&1 &
      rp=$!
      wait_until 20 grep -q '^ready' "$W/recv.join"
      check "... with RSVERBS_MCAST_FABRICJOIN=1 (rsverbs joined at the SA): the MFT sends 0x$mlid to ports 1 and 2" \
        wait_until 30 mft_is "$mlid" "1 2"
      ip netns exec $NS "$T" doctor $G --dev sib1 > "$W/doctor.joined" 2>&1; dst=$?
      show "rsverbs doctor $G --dev sib1 (the receiver joined)" "$W/doctor.joined"
      check "... and rsverbs doctor on sib1 while it is joined: ready (exit $dst), membership ok" \
        bash -c "[ $dst = 0 ] && grep -Eq '^  ok +membership ' '$W/doctor.joined'"
      mckey_send send2
      wait "$rp"; rst=$?
      show "recv (FABRICJOIN=1)" "$W/recv.join"; show "mckey -s" "$W/mckey.send2"
      check "... and its twin with the join got all 5 of mckey's datagrams (exit $rst, $sst)" \
        bash -c "[ $rst = 0 ] && [ $sst = 0 ] && grep -qx 'done 5' '$W/recv.join'"
      check "... and after its leave no port again" wait_until 30 mft_is "$mlid" ""
      # An opensm restart while a receiver that only attaches holds the
      # group through the fabric join (sibdata hold, rsverbs preloaded,
      # FABRICJOIN=1): the new SM knows no group but those IPoIB joins
      # again, and its first sweep as master sets ClientReregister on every
      # port (osm_lid_mgr.c); the kernel's multicast module then ends every
      # membership with -ENETRESET (multicast.c mcast_groups_event), which
      # the engine reads at the receiver's next call that touches the
      # group, here a second attach of it (ib_uverbs answers 0), and joins
      # again in that call (docs/fabric-join.md). Before that call the
      # switch drops the group's datagrams for sib1; after it they arrive.
      # The new SM numbers its groups anew (IPoIB's come back first), so
      # the group's MLID may change: then hint[mlid-mismatch] names the
      # new one, and the program detaches and attaches with it (as rdma_cm
      # programs take the MLID of each join event); sib delivers to a QP
      # attached with the packet's MLID (as rdmavt does: rvt_mcast_find).
      # hold_start NAME MGID LID: sibdata hold on sib1 in $NS (rsverbs
      # preloaded, FABRICJOIN=1, its trace with hints in $W/NAME.trace),
      # in the coprocess HOLD; hold CMD: one command to it, its answer in
      # $ans and, after the command, in $W/NAME.out.
      hold_start() {
        coproc HOLD { exec ip netns exec $NS env LD_PRELOAD="$RSVERBS_LIB" RSVERBS_MCAST_FABRICJOIN=1 RSVERBS_TRACE=hints \
          "$W/sibdata" hold sib1 "$2" "$3" 0x01234567 2> "$W/$1.trace"; }
        hold_pid=$HOLD_PID h_out=${HOLD[0]} h_in=${HOLD[1]} hold_log=$W/$1.out
      }
      hold() {
        [ -z "$1" ] || echo "$1" >&$h_in
        ans=; read -r -t 40 ans <&$h_out; echo "${1:-start} -> $ans" >> "$hold_log"
      }
      hold_start hold $GM 0x$mlid
      # mckey_dropped WHEN HAVE NAME: mckey -s sends 5 datagrams of $G from
      # sib0 ($W/mckey.NAME); the switch drops all 5 (switch_drops) and the
      # holder, polled, still has HAVE.
      mckey_dropped() {
        local d0
        d0=$(drops)
        mckey_send "$3"
        check "... $1, the switch drops mckey's 5 (exit $sst; switch_drops from $d0)" \
          wait_until 10 bash -c "[ $sst = 0 ] && [ \$(cat $P/switch_drops) -ge $((d0 + 5)) ]"
        hold poll
        check "... and the receiver got none of them" [ "$ans" = "have $2" ]
      }
      hold ""
      check "a receiver on sib1 holds $G through the fabric join (its attach: 0)" [ "$ans" = "attach rc=0" ]
      check "... the MFT sends 0x$mlid to ports 1 and 2" wait_until 30 mft_is "$mlid" "1 2"
      mckey_send send3
      hold "wait 5"
      check "... it got mckey's 5 datagrams before the restart (exit $sst, $ans)" bash -c "[ $sst = 0 ] && [ '$ans' = 'have 5' ]"
      keep_release
      osm_stop
      osm_start "$W/opensm2.log"
      check "after an opensm restart IPoIB joined its broadcast group again (both ports)" \
        wait_until 120 records_are ff12:401b:ffff::ffff:ffff 2
      check "... the new SA has no record of $GM: the memberships were lost with the old one" records_are $GM 0
      # Twin: before the receiver's next call, mckey on sib0 makes the group
      # again (its own join): the switch drops its datagrams for sib1.
      mckey_dropped "before the receiver's next call" 5 send4
      # The receiver's next call: its second attach reads the loss and joins again.
      hold attach
      check "the receiver's next call after the re-register (a second attach): 0" [ "$ans" = "attach rc=0" ]
      check "... the loss traced (ENETRESET) and $GM joined again in that call" bash -c \
        "grep -q 'fabricjoin lost netdev=ib1 .*mgid=$GM .*ENETRESET' '$W/hold.trace' &&
         [ \$(grep -c 'fabricjoin joined netdev=ib1 .*mgid=$GM' '$W/hold.trace') = 2 ]"
      check "... and the new SA has sib1's record of $GM again" wait_until 10 records_are $GM 1
      m2=$(sa_mlid $GM); m2=$(printf %04x "0x${m2:-0}")
      if [ "$m2" = "$mlid" ]; then
        check "... with the MLID the receiver attached (0x$mlid): no hint[mlid-mismatch]" bash -c "! grep -q 'hint\[mlid-mismatch\]' '$W/hold.trace'"
      else
        check "... the new SA's MLID 0x$m2 is not the attach's 0x$mlid: hint[mlid-mismatch] names it" \
          grep -Eq "hint\[mlid-mismatch\]: .*attached with LID 0x$mlid, but the SA's MLID of the group is 0x$m2" "$W/hold.trace"
        hold "reattach 0x$m2"
        check "... the receiver detaches 0x$mlid and attaches with 0x$m2: 0, 0" [ "$ans" = "detach rc=0 attach rc=0" ]
        check "... its fabric join left and joined again with 0x$m2, no hint[mlid-mismatch] after it" bash -c \
          "tail -n 4 '$W/hold.trace' | grep -q 'fabricjoin leave netdev=ib1 .*mgid=$GM .*result=0' &&
           tail -n 1 '$W/hold.trace' | grep -Eq 'fabricjoin joined netdev=ib1 .*mgid=$GM .*mlid=0x$m2 '"
      fi
      keep_group $G
      check "... with librdmacm on sib0 again, the MFT sends the group's 0x$m2 to ports 1 and 2" wait_until 30 mft_is "$m2" "1 2"
      mckey_send send5
      hold "wait 10"
      check "... and mckey's next 5 datagrams arrive, each once (exit $sst, $ans)" bash -c "[ $sst = 0 ] && [ '$ans' = 'have 10' ]"
      # None after the detach: its fabric join leaves, the SM takes port 2
      # out of the MFT, and mckey's next 5 are dropped at the switch.
      hold detach
      check "... its detach: 0, and its fabric join left the group" bash -c \
        "[ '$ans' = 'detach rc=0' ] && tail -n 1 '$W/hold.trace' | grep -q 'fabricjoin leave netdev=ib1 .*mgid=$GM .*result=0'"
      check "... the MFT names no port for 0x$m2 again (sib0 the only member)" wait_until 30 mft_is "$m2" ""
      mckey_dropped "after the detach" 10 send6
      hold end
      check "... it ends without a second detach" [ "$ans" = "done" ]
      wait "$hold_pid"
      show "holder" "$W/hold.out"; show "holder's trace" "$W/hold.trace"
      # perftest's UD multicast on InfiniBand: its own SA join (umad, as
      # root) at both ends, through the switch, with rdma-core alone and
      # with rsverbs preloaded (its attach and detach then rsverbs'):
      # both ends report their 100 iterations.
      # Preloaded, both ends trace into one file (RSVERBS_TRACE=hints:FILE)
      # with uretprobes on librsverbs' five verbs: one trace line per call
      # on InfiniBand too (as ctest/vm/trace.sh shows on rxe).
      source "$ROOT/ctest/vm/uprobes.bash"
      probes=0
      if probes_on rsvsib 8192 ="$RSVERBS_LIB"; then probes=1; pass "uretprobes on librsverbs.so.1's five verbs"; else fail "cannot set uretprobes on librsverbs.so.1"; fi
      port=18700
      for tool in ib_send_bw ib_send_lat; do
        for mode in ref pre; do
          pre=(); [ $mode = pre ] && pre=(env LD_PRELOAD="$RSVERBS_LIB" RSVERBS_TRACE="hints:$W/$tool.trace")
          [ $probes = 1 ] && probes_clear
          port=$((port + 1))
          ip netns exec $NS "${pre[@]}" timeout 60 $tool -d sib1 -c UD --mcg -n 100 -F -p $port > "$W/$tool.$mode.server" 2>&1 &
          sp=$!
          wait_until 20 tcp_listening $port "$sp"
          "${pre[@]}" timeout 60 $tool -d sib0 -c UD --mcg -n 100 -F -p $port 10.77.0.2 > "$W/$tool.$mode.client" 2>&1; cst=$?
          wait "$sp"; sst=$?
          show "$tool --mcg server ($mode)" "$W/$tool.$mode.server"; show "$tool --mcg client ($mode)" "$W/$tool.$mode.client"
          check "$tool -c UD --mcg through the switch ($([ $mode = pre ] && echo 'rsverbs preloaded' || echo 'rdma-core alone')): both ends ran 100 iterations (exit $cst, $sst)" \
            bash -c "[ $cst = 0 ] && [ $sst = 0 ] && grep -Eq '^ [0-9]+ +100 ' '$W/$tool.$mode.client' && grep -Eq '^ [0-9]+ +100 ' '$W/$tool.$mode.server' && ! grep -q \"Couldn't\" '$W/$tool.$mode.server' '$W/$tool.$mode.client'"
          if [ $mode = pre ]; then
            [ $probes = 1 ] && counts_equal "$tool --mcg on InfiniBand, preloaded" "$W/$tool.trace"
            check "... its trace lines well formed" well_formed "$W/$tool.trace"
            check "... its attach traced on sib1 with the SA's multicast LID, as perftest joined it" \
              grep -Eq "^rsverbs\[[0-9]+\]: ibv_attach_mcast dev=sib1 port=1 .* lid=0xc[0-9a-f]{3} result=0 " "$W/$tool.trace"
          fi
        done
      done
      probes_off
      # No subnet manager: opensm stopped, the ports stay ACTIVE with its SM
      # LID, a receiver attaches with the fabric join. Its attach answers as
      # without it. The SA query reaches sib0's port, whose MAD layer has no
      # agent for the SA class and answers the Set itself with status
      # "unsupported method/attribute" (mad.c generate_unmatched_resp),
      # which the SA client makes EINVAL as every MAD status (sa_query.c
      # recv_handler): the join's event EINVAL, at once, a trace line and
      # hint[fabric-join-failed] naming both causes. (ETIMEDOUT needs an SM
      # LID that nothing answers at.) Read at the attach or a later one.
      osm_stop
      G3=239.77.22.22 GM3=ff12:4001:ffff::f4d:1616
      hold_start nosm $GM3 0xc00a
      hold ""
      check "without an SM: the attach with the fabric join answers 0, as without it" [ "$ans" = "attach rc=0" ]
      failed_join() { hold attach; grep -Eq "fabricjoin (join|lost) netdev=ib1 .*mgid=$GM3 .*result=" "$W/nosm.trace"; }
      wait_until 90 failed_join
      show "holder without an SM" "$W/nosm.out"; show "its trace" "$W/nosm.trace"
      e=$(sed -n "s/.*fabricjoin \(join\|lost\) netdev=ib1 .*mgid=$GM3 .*step=\([a-z]*\) result=\([A-Z]*\).*/\2 \3/p" "$W/nosm.trace" | head -1)
      check "... the join's event EINVAL (${e:-no failure seen}), hint[fabric-join-failed] naming a missing SA" bash -c \
        "[ '$e' = 'event EINVAL' ] && grep -q 'hint\[fabric-join-failed\]: RSVERBS_MCAST_FABRICJOIN could not join $GM3 .*EINVAL(22) at event .*or no SA runs at the SM LID' '$W/nosm.trace'"
      check "... and every attach still answered 0" bash -c "! grep -v 'attach rc=0' '$W/nosm.out' | grep -q attach"
      hold end
      wait "$hold_pid"
    fi
    keep_release
    ip netns del $NS 2>/dev/null
  else
    fail "IPoIB setup: $(cat "$W/ipoib.err")"
  fi
  osm_stop
  tail -n 30 "$W/opensm.log" > "$W/opensm.tail" 2>/dev/null; show "opensm.log (tail)" "$W/opensm.tail"
  show "switch_drops" <(drops)
  sib_unload "with switch=1" "$dmesg_at" dmesg
fi
osm_stop
mkdir -p "$RESULTS_DIR/sibswitch" && cp "$W"/* "$RESULTS_DIR/sibswitch/" 2>/dev/null
rm -rf "$W"
finish
