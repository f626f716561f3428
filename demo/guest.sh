#!/usr/bin/env bash
# Guest side of `make demo` (started by demo/run.sh in the Soft-RoCE test
# bed): runs our example relinked against rsverbs and the unmodified mckey
# with LD_PRELOAD=librsverbs.so.1, counts with uretprobes which library
# served each verb call, and writes a summary to /out/summary.txt.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
LIB=$PWD/build/librsverbs.so.1
BIN=$PWD/ctest/out/bin
DEV=rxe1 NETDEV=dummy0 ADDR=192.0.2.1 GROUP=239.4.4.4 MCKEY_GROUP=239.2.2.2 COUNT=10
W=$(mktemp -d)
LIBIBVERBS=$(ldd "$(command -v mckey)" | awk '$1 == "libibverbs.so.1" { print $3 }')
VERBS=(ibv_attach_mcast ibv_detach_mcast _ibv_query_gid_ex)
SHORT=(attach detach gid) # their uprobe names (ctest/vm/uprobes.bash)
failed=0

say() { printf '\n== %s\n' "$*"; }
bad() { echo "demo: FAILED: $*"; failed=1; }

# ---- uretprobes: every call of the three verbs, in either library ---------
source "$(dirname "$0")/../ctest/vm/uprobes.bash"
probes=0
probes_on rsvdemo 1408 rsverbs="$LIB" libibverbs="$LIBIBVERBS" && probes=1
# served LABEL: one line per verb, "verb: N calls in librsverbs.so.1, M in libibverbs.so.1"
served() {
	local i r l
	for i in 0 1 2; do
		r=$(grep -c " rsverbs_${SHORT[i]}: " $TR/trace)
		l=$(grep -c " libibverbs_${SHORT[i]}: " $TR/trace)
		printf '           %-18s %2d calls served by librsverbs.so.1, %d by libibverbs.so.1\n' "${VERBS[i]}" "$r" "$l"
		((l == 0)) || bad "$1: ${VERBS[i]} reached libibverbs"
	done
	: > $TR/trace
}

# ---- the devices ------------------------------------------------------------
say "Soft-RoCE devices (kernel $(uname -r))"
rdma link show

# ---- 1. our example, relinked --------------------------------------------------
say "ctest/vm/mcgroup.c, built with \$(pkg-config --cflags --libs rsverbs):"
echo "   $(ldd "$BIN/mcgroup.rsv" | grep -E 'librsverbs|libibverbs' | awk '{ print $1 " => " $3 }' | tr '\n' ' ')"
: > $TR/trace 2>/dev/null
timeout -k 5 120 "$BIN/mcgroup.rsv" -d $DEV -g $GROUP -n $COUNT | tee "$W/mcgroup"
rc=${PIPESTATUS[0]}
((rc == 0)) || bad "mcgroup exited with status $rc"
((probes)) && served mcgroup > "$W/mcgroup.served"

# ---- 2. mckey, unmodified, preloaded ----------------------------------------
say "mckey (rdmacm-utils, unmodified) with LD_PRELOAD=$LIB"
pre() { timeout -k 5 120 env LD_PRELOAD="$LIB" stdbuf -oL "$@"; }
pre mckey -m $MCKEY_GROUP -b $ADDR -C $COUNT > "$W/recv" 2>&1 &
rpid=$!
# The receiver must have joined before the sender sends (bounded poll).
for ((i = 0; i < 600; i++)); do
	grep -q '^receiving data transfers' "$W/recv" && break
	kill -0 $rpid 2>/dev/null || break
	sleep 0.1
done
pre mckey -m $MCKEY_GROUP -b $ADDR -C $COUNT -s > "$W/send" 2>&1
src=$?
wait $rpid
rrc=$?
echo "  receiver (exit status $rrc):"; sed 's/^/    /' "$W/recv"
echo "  sender (exit status $src):"; sed 's/^/    /' "$W/send"
for f in recv send; do
	grep -q '^data transfers complete$' "$W/$f" && grep -q '^return status 0$' "$W/$f" ||
		bad "mckey $f did not complete"
done
((rrc == 0 && src == 0)) || bad "mckey exit status: receiver $rrc, sender $src"
((probes)) && served mckey > "$W/mckey.served"

# ---- 3. "I attached, and nothing arrives" ---------------------------------------
# ctest/vm/trace.c's qkey scenario: a UD receiver (Q_Key 0x11111111)
# attaches GROUP, a sender on the same device posts N datagrams and a
# marker; the receiver counts what completes. Four runs, preloaded with
# RSVERBS_TRACE=hints (docs/trace.md):
#   a. the receiver only attaches (no IP-level join): nothing arrives, and
#      hint[no-ip-join] says why;
#   b. the same with RSVERBS_MCAST_IPJOIN=1: rsverbs joins, all arrive;
#   c. the sender uses rdma_cm's Q_Key: the port drops them, and
#      hint[qkey-violations] counts them;
#   d. rsverbs doctor: the host's state for the group.
QGROUP=239.7.7.9 QN=8
story() { # LABEL SENDER_QKEY ENV...: one run; prints its completions and hints
	local label=$1 qk=$2; shift 2
	timeout -k 5 60 env "$@" RSVERBS_TRACE="hints:$W/$label.trace" LD_PRELOAD="$LIB" \
		"$BIN/trace" qkey $DEV $QGROUP $QN "$qk" > "$W/$label.out" 2>&1
	sed -n "s/^trace: qkey completions=\([0-9]*\).*/\1/p" "$W/$label.out" > "$W/$label.got"
	echo "   $(cat "$W/$label.got") of $((QN + 1)) datagrams arrived"
	grep -h 'hint\[' "$W/$label.trace" | sed 's/^/   /' | cut -c1-400
}
say "3a. a receiver that only attaches (no IP-level join), RSVERBS_TRACE=hints"
story nojoin 0x11111111 TRACE_NOJOIN=1
[ "$(cat "$W/nojoin.got")" = 0 ] || bad "3a: something arrived without a join"
grep -q 'hint\[no-ip-join\]' "$W/nojoin.trace" || bad "3a: no hint[no-ip-join]"
say "3b. the same receiver with RSVERBS_MCAST_IPJOIN=1: rsverbs makes the join"
story ipjoin 0x11111111 TRACE_NOJOIN=1 RSVERBS_MCAST_IPJOIN=1
grep -h '^rsverbs.*ipjoin join' "$W/ipjoin.trace" | sed 's/^/   /'
[ "$(cat "$W/ipjoin.got")" = $((QN + 1)) ] || bad "3b: not every datagram arrived with the join"
say "3c. joined, but the sender uses rdma_cm's Q_Key 0x01234567"
story qkey 0x01234567 RSVERBS_MCAST_IPJOIN=1
[ "$(cat "$W/qkey.got")" = 1 ] || bad "3c: more than the marker arrived"
grep -q 'hint\[qkey-violations\]' "$W/qkey.trace" || bad "3c: no hint[qkey-violations]"
say "3d. rsverbs doctor $QGROUP --dev $DEV (nobody holds the group now)"
"$PWD/build/rsverbs" doctor $QGROUP --dev $DEV | sed 's/^/   /'

# ---- the summary --------------------------------------------------------------
field() { sed -n "s/^mcgroup: $1.*/\\1/p" "$W/mcgroup"; }
{
	echo "device     $DEV: Soft-RoCE on $NETDEV ($ADDR), Linux $(uname -r) under qemu;" \
		"source GID$(field 'device .*source GID\(\[[0-9]*\] [^ ]*\).*')"
	echo "example    ctest/vm/mcgroup.c relinked with pkg-config rsverbs, group $GROUP ($(field 'group [^ ]* = MGID \([^,]*\)'))"
	echo "           while attached: $(field 'while attached: \(.*\)')"
	echo "           after detach:   $(field 'after detach: *\(.*\)')"
	echo "           dladdr says:    $(field 'verbs served by: \(.*\)')"
	((probes)) && cat "$W/mcgroup.served"
	if grep -q '^data transfers complete$' "$W/recv" && grep -q '^data transfers complete$' "$W/send"; then
		echo "mckey      unmodified, LD_PRELOAD, group $MCKEY_GROUP: sender posted $COUNT datagrams" \
			"(exit $src), receiver received all $COUNT (exit $rrc)"
	else
		echo "mckey      unmodified, LD_PRELOAD, group $MCKEY_GROUP: did NOT complete" \
			"(sender exit $src, receiver exit $rrc)"
	fi
	grep -h '^mckey: joined' "$W/recv" | sed 's/^/           receiver /'
	((probes)) && cat "$W/mckey.served"
	((probes)) || echo "           (uprobes unavailable: no per-call count)"
	echo "nothing    a receiver that only attaches got $(cat "$W/nojoin.got") of $((QN + 1)) (hint[no-ip-join]);" \
		"with RSVERBS_MCAST_IPJOIN=1 $(cat "$W/ipjoin.got"); with the sender on another Q_Key" \
		"$(cat "$W/qkey.got") (hint[qkey-violations])"
	((failed)) && echo "RESULT     FAILED (see above)" || echo "RESULT     OK: every call of the three verbs was served by librsverbs.so.1"
} > /out/summary.txt
rm -rf "$W"
exit $failed
