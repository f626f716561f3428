#!/usr/bin/env bash
# The safe Rust API (rsverbs::safe, docs/rust.md), in the guest: the example
# build/examples/attach (examples/attach.rs) creates a UD QP with rdma-core
# on rxe1, attaches a group through rsverbs::safe and holds it (--wait):
#  - while held, the kernel shows the group: rxe adds the group's multicast
#    MAC to its netdev (rxe_mcast.c `rxe_mcast_add` → `dev_mc_add`), seen in
#    /proc/net/dev_mcast;
#  - after the Attachment is dropped, with the QP still open, rdma-core's
#    own ibv_detach_mcast of the group fails with EINVAL: the kernel has no
#    such attachment (rxe_mcast.c `rxe_detach_mcg`: "we didn't find the qp
#    on the list"); the example's control step (a forgotten Attachment
#    stays, and rdma-core detaches it with 0) and its GID table step pass.
#    The MAC is no witness of the detach: on 6.1, rxe's detach frees the
#    group without `rxe_mcast_del` (seen: the MAC stays after the last
#    detach), so the suite only reports whether it went.
# The example links the crate as an rlib, not librsverbs.so.1: no preload.
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
X=${RSVERBS_EXAMPLE:-$(dirname "$RSVERBS_LIB")/examples/attach}
DEV=rxe1 ND=dummy0
MAC=3333ef050701 # ::ffff:239.5.7.1 (or v1's ff0e::ffff:ef05:701), the example's group (RFC 2464 7)
W=$(mktemp -d)
trap 'rm -rf "$RESULTS_DIR/rust" && mkdir -p "$RESULTS_DIR/rust" && cp -r "$W"/. "$RESULTS_DIR/rust/"; rm -rf "$W"' EXIT

if [ "${RSVERBS_USERLAND:-bookworm}" != bookworm ]; then
	echo "skip rust: $X is built against the host's glibc (bookworm) and runs in that userland only"
	finish
	exit
fi

mac_on() { awk -v n=$ND -v m=$MAC '$2 == n && $5 == m { f = 1 } END { exit !f }' /proc/net/dev_mcast; }
mac_off() { ! mac_on; }
check "before: $MAC not on $ND" mac_off

# lines_upto FD FILE PREFIX: reads a program's lines from FD into FILE
# until one starts with PREFIX; false when it ends first (or stays silent
# for 60 s).
lines_upto() {
	local line
	while IFS= read -r -t 60 line <&"$1"; do
		echo "$line" >> "$2"
		case $line in "$3"*) return 0 ;; esac
	done
	return 1
}
coproc EX { exec "$X" --wait $DEV 2>&1; }
ex_pid=$EX_PID # bash unsets EX_PID once the coproc has ended
# upto PREFIX: the example's lines, into attach.out.
upto() { lines_upto "${EX[0]}" $W/attach.out "$1"; }
if upto "attach: holding it"; then
	pass "the example attached through rsverbs::safe and holds the group"
	check "held: the kernel shows the group ($MAC on $ND in /proc/net/dev_mcast)" wait_until 10 mac_on
	echo >&"${EX[1]}"
	if upto "attach: dropped"; then
		if mac_on; then m="stays (rxe leaves it)"; else m="is gone"; fi
		echo "note rust: after the drop, $MAC on $ND $m"
		pass "the example reported the drop"
		echo "$m" > $W/mac_after_drop
		echo >&"${EX[1]}"
	else
		fail "the example did not report the drop"
	fi
else
	fail "the example did not reach the attachment"
fi
upto "never printed"
wait "$ex_pid"
rc=$?
check "the example exits 0: every step as it should be (rc $rc)" [ $rc = 0 ]
for step in "GID entries; perftest's index" "attached through rsverbs::safe" "after the drop, rdma-core's ibv_detach_mcast" "control: a forgotten attachment stays; rdma-core detaches it: 0"; do
	check "step: $step" grep -q "^attach: ok .*$step" $W/attach.out
done
grep -q WRONG $W/attach.out && fail "a step is WRONG: $(grep WRONG $W/attach.out | head -1)"

# The receiver (examples/receiver.rs, which ctest/consumer also builds as a
# dependent crate; docs/rust.md): build/examples/receiver attaches the MGIDs
# of 239.5.7.17 and .18 for its source GID's type (safe::mgid_for_group:
# ::ffff:239.5.7.17 on rxe's RoCE v2 GIDs) and keeps its QP and the two
# Attachments in one struct. While it holds them the
# kernel shows the first group's MAC; dropping one attachment detaches it
# (rdma-core's ibv_detach_mcast then EINVAL); dropping the struct detaches
# the other before the QP is destroyed, and the kernel's ibv_destroy_qp
# answers 0, where it answers EBUSY for a QP still attached (the control:
# a forgotten attachment).
R=${RSVERBS_RECEIVER:-$(dirname "$RSVERBS_LIB")/examples/receiver}
MAC=3333ef050711 # ::ffff:239.5.7.17 (or v1's ff0e::ffff:ef05:711), the receiver's first group
check "before the receiver: $MAC not on $ND" mac_off
coproc RX { exec "$R" --wait $DEV 2>&1; }
rx_pid=$RX_PID
# rx_upto PREFIX: the receiver's lines, into receiver.out.
rx_upto() { lines_upto "${RX[0]}" $W/receiver.out "$1"; }
if rx_upto "receiver: holding them"; then
	pass "the receiver holds two groups in the struct beside its QP"
	check "held by the receiver: the kernel shows the group ($MAC on $ND)" wait_until 10 mac_on
	echo >&"${RX[1]}"
	check "the receiver reported the drop of its struct" rx_upto "receiver: dropped"
	echo >&"${RX[1]}"
else
	fail "the receiver did not reach its attachments"
fi
rx_upto "never printed"
wait "$rx_pid"
rc=$?
check "the receiver exits 0: every step as it should be (rc $rc)" [ $rc = 0 ]
for step in "perftest's source GID index on port 1 of $DEV" "two groups held in the struct" \
	"after dropping the first attachment, rdma-core's ibv_detach_mcast of it: 22" \
	"dropping the struct detached the second group, then ibv_destroy_qp: 0" \
	"control: a forgotten attachment stays, and ibv_destroy_qp is 16" \
	"control: rdma-core detaches it: 0" "control: then ibv_destroy_qp: 0"; do
	check "receiver step: $step" grep -qF "receiver: ok $step" $W/receiver.out
done
grep -q WRONG $W/receiver.out && fail "a receiver step is WRONG: $(grep WRONG $W/receiver.out | head -1)"
finish
