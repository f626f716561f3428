#!/usr/bin/env bash
# RSVERBS_MCAST_IPJOIN, in the guest (docs/ipjoin.md). ctest/vm/ipjoin.c
# runs the same attach/detach sequence (IPv4-mapped and IPv6 groups, two
# QPs, a duplicate attach, failed calls, fork, exec) on rxe1 (dummy0) and
# rxe0 (lo), and checks /proc/net/igmp{,6} after each step, in these runs:
#   ref       rdma-core alone                          no join expected
#   off       rsverbs preloaded, variable unset        no join expected
#   zero      rsverbs preloaded, RSVERBS_MCAST_IPJOIN=0 no join expected
#   on        rsverbs preloaded, RSVERBS_MCAST_IPJOIN=1 joins expected
#   relinked  ipjoin.rsv, RSVERBS_MCAST_IPJOIN=1        joins expected
#   traced    preloaded, IPJOIN=1, RSVERBS_TRACE=FILE  joins expected, and
#             one "ipjoin join"/"ipjoin leave" trace line per join/leave
#   nobufs    preloaded, IPJOIN=1, RSVERBS_TRACE=FILE, with
#             net.ipv4.igmp_max_memberships=0: every IPv4 join fails
#             (ENOBUFS, in the trace), IPv6 joins still happen
# The fabric join (RSVERBS_MCAST_FABRICJOIN, docs/fabric-join.md), its
# rdma_cm engine forced onto these RoCE ports (=roce: IPv4 groups; the
# kernel joins IPv6 ones with ENOTSUPP there), the same sequence with an
# rdma_cm fd holding the joins instead of sockets:
#   cm        preloaded, RSVERBS_MCAST_FABRICJOIN=roce    IPv4 joins expected
#   cmrelinked ipjoin.rsv, the same                       IPv4 joins expected
#   cmtraced  preloaded, =roce, RSVERBS_TRACE=hints:FILE  and one
#             "fabricjoin joined"/"fabricjoin leave" line per join/leave,
#             no hint[fabric-join-failed]
#   cmqkey    as cmtraced, the QPs with the group's Q_Key (rdma_cm's):
#             no hint[qkey-mismatch] (cmtraced, perftest's Q_Key: one a join)
#   cmib      preloaded, RSVERBS_MCAST_FABRICJOIN=1       no join (InfiniBand
#             ports only), no rdma_cm fd
# and a holder killed with SIGKILL: its group is gone once it is reaped
# (the kernel's rdma_cm leaves when the fd's last reference goes).
# The "call" lines (each verb's return value and errno) must be identical
# in every run: the feature never changes a verb's result.
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
W=$(mktemp -d)
P=$BIN/ipjoin
TMO=${IPJOIN_TIMEOUT:-60}
MAXM=$(sysctl -n net.ipv4.igmp_max_memberships)
cleanup() {
	sysctl -qw net.ipv4.igmp_max_memberships="$MAXM"
	rm -rf "$RESULTS_DIR/ipjoin" && mkdir -p "$RESULTS_DIR/ipjoin" && cp -r "$W"/. "$RESULTS_DIR/ipjoin/"
	rm -rf "$W"
}
trap cleanup EXIT

# one DEV NETDEV OTHER LABEL E4E6 [env...] [--] PROGRAM: one run, its checks.
one() {
	local dev=$1 nd=$2 other=$3 label=$4 expect=$5; shift 5
	local out=$W/$dev.$label
	timeout "$TMO" env "$@" "$dev" "$nd" "$other" "$expect" > "$out" 2> "$out.err"
	local rc=$?
	check "$dev $label: exits 0 (all membership checks hold)" test $rc -eq 0
	[ $rc -eq 0 ] || { grep -h '^FAIL' "$out" | sed "s/^/ipjoin: $dev $label: /" >&2; tail -3 "$out.err" >&2; }
	grep '^call ' "$out" > "$out.calls"
}

served() { # served FILE LIBRARY
	grep -q "^served-by ibv_attach_mcast=$2 ibv_detach_mcast=$2 _ibv_query_gid_ex=$2" "$1"
}

# cm_writes FILE: the rdma_cm writes in an `strace -xx -y` log, one line
# each: LENGTH HEX.
cm_writes() {
	sed 's/<\\x2f\\x64\\x65\\x76\\x2f\\x69\\x6e\\x66\\x69\\x6e\\x69\\x62\\x61\\x6e\\x64\\x2f\\x72\\x64\\x6d\\x61\\x5f\\x63\\x6d>/<\/dev\/infiniband\/rdma_cm>/' "$1" | sed -n 's/.*write([0-9]*<\/dev\/infiniband\/rdma_cm>, "\(\(\\x[0-9a-f][0-9a-f]\)*\)", \([0-9]*\)).*/\3 \1/p' |
		sed 's/\\x//g'
}
# cm_pick FILE LEN: of the rdma_cm writes, the 160-byte JOIN_MCAST (LEN 160),
# or the last LEN-byte write before it (32: CREATE_ID, 144: BIND), with the
# fields that are pointers, cookies or kernel handles masked (uid, response,
# id: rdma_user_cm.h), so that what is left is what the kernel is asked.
cm_pick() {
	cm_writes "$1" | awk -v want="$2" '
		function mask(h, off, len,   i) { for (i = 0; i < len * 2; i++) h = substr(h, 1, off * 2 + i) "x" substr(h, off * 2 + i + 2); return h }
		$1 == 160 { if (want == 160) print mask(mask(mask($2, 8, 8), 16, 8), 24, 4); else if (last != "") print last; exit }
		$1 == want && want == 32 { last = mask(mask($2, 8, 8), 16, 8) }
		$1 == want && want == 144 { last = mask($2, 8, 4) }'
}

# The fabric join's bytes against librdmacm's for the same intent, live in
# this boot (docs/fabric-join.md): rsverbs' engine (RSVERBS_MCAST_FABRICJOIN=
# roce, one attach of 239.77.1.10) and mckey's join of the same group from
# the same address (-m GROUP -b ADDR, a sender: it joins, then sends one
# datagram and exits), both under strace: CREATE_ID, BIND and JOIN_MCAST
# equal but for pointers, cookies and handles. mckey -M (an unmapped MGID,
# the InfiniBand intent, AF_IB) is refused on RoCE (ENOTSUPP), but its
# JOIN_MCAST is written all the same: its bytes are kept in the results for
# the encoder's unit test (src/uverbs/cm.rs, the_ib_join_is_mckeys).
cm_bytes() {
	local dev=$1 addr=$2 what
	strace -qq -xx -y -s 1024 -e trace=write -o "$W/$dev.cm.strace" \
		env RSVERBS_MCAST_FABRICJOIN=roce LD_PRELOAD="$RSVERBS_LIB" "$P" --hold "$dev" < /dev/null > /dev/null 2>&1
	timeout "$TMO" strace -qq -xx -y -s 1024 -e trace=write -o "$W/$dev.mckey.strace" \
		mckey -m 239.77.1.10 -b "$addr" -s -C 1 > "$W/$dev.mckey.out" 2>&1
	timeout "$TMO" strace -qq -xx -y -s 1024 -e trace=write -o "$W/$dev.mckeyM.strace" \
		mckey -M ff12:401b:ffff::ef4d:10a -b "$addr" -s -C 1 > "$W/$dev.mckeyM.out" 2>&1
	cm_pick "$W/$dev.mckeyM.strace" 160 > "$W/$dev.mckeyM.join"
	echo "ipjoin: mckey -M's JOIN_MCAST (masked): $(cat "$W/$dev.mckeyM.join")"
	for what in 32:CREATE_ID 144:BIND 160:JOIN_MCAST; do
		local ours theirs
		ours=$(cm_pick "$W/$dev.cm.strace" "${what%:*}") theirs=$(cm_pick "$W/$dev.mckey.strace" "${what%:*}")
		check "$dev bytes: rsverbs' ${what#*:} is librdmacm's (mckey -m -b) but for pointers and handles" \
			test -n "$ours" -a "$ours" = "$theirs"
		[ -n "$ours" ] && [ "$ours" = "$theirs" ] || echo "ipjoin: ${what#*:}: rsverbs $ours, librdmacm $theirs" >&2
	done
}

for spec in rxe1:dummy0:lo rxe0:lo:dummy0; do
	IFS=: read -r dev nd other <<< "$spec"
	t0=$(date +%s%N)
	one "$dev" "$nd" "$other" ref 00 -- "$P"
	one "$dev" "$nd" "$other" off 00 -u RSVERBS_MCAST_IPJOIN LD_PRELOAD="$RSVERBS_LIB" "$P"
	one "$dev" "$nd" "$other" zero 00 RSVERBS_MCAST_IPJOIN=0 LD_PRELOAD="$RSVERBS_LIB" "$P"
	one "$dev" "$nd" "$other" on 11 RSVERBS_MCAST_IPJOIN=1 LD_PRELOAD="$RSVERBS_LIB" "$P"
	one "$dev" "$nd" "$other" relinked 11 RSVERBS_MCAST_IPJOIN=1 "$P.rsv"
	one "$dev" "$nd" "$other" traced 11 RSVERBS_MCAST_IPJOIN=1 RSVERBS_TRACE="$W/$dev.traced.trace" \
		LD_PRELOAD="$RSVERBS_LIB" "$P"
	sysctl -qw net.ipv4.igmp_max_memberships=0
	one "$dev" "$nd" "$other" nobufs 01 RSVERBS_MCAST_IPJOIN=1 RSVERBS_TRACE="$W/$dev.nobufs.trace" \
		LD_PRELOAD="$RSVERBS_LIB" "$P"
	sysctl -qw net.ipv4.igmp_max_memberships="$MAXM"

	check "$dev ref: served by libibverbs" served "$W/$dev.ref" libibverbs.so.1
	for m in off zero on relinked traced nobufs; do
		check "$dev $m: served by librsverbs" served "$W/$dev.$m" librsverbs.so.1
		check "$dev $m: return values and errno identical to rdma-core's" \
			diff -u "$W/$dev.ref.calls" "$W/$dev.$m.calls"
	done
	check "$dev: the sequence made its 25 calls ($(wc -l < "$W/$dev.ref.calls") call lines)" \
		test "$(wc -l < "$W/$dev.ref.calls")" -eq 25
	check "$dev: rdma-core's failed calls are there (EINVAL on the RC QP, the unicast GID, the detaches)" \
		test "$(grep -c 'rc=22 errno=22' "$W/$dev.ref.calls")" -ge 4

	# The trace: one join and one leave per group that was joined and left
	# by the parent (v4: 1 3 4 6 7 8 and 9 joined; 8 never left, its QP
	# having been detached by a child; 9 left once, not at its refused
	# detach), plus the fork child's own join and leave.
	tr=$W/$dev.traced.trace
	joins=$(grep -c "ipjoin join netdev=$nd .*result=0$" "$tr")
	leaves=$(grep -c "ipjoin leave netdev=$nd .*result=0$" "$tr")
	echo "ipjoin: $dev traced: $joins joins, $leaves leaves on $nd"
	check "$dev traced: 9 joins and 8 leaves on $nd, all successful" test "$joins:$leaves" = 9:8
	check "$dev traced: no join or leave on another netdev" test "$(grep -c 'ipjoin ' "$tr")" -eq 17
	tr=$W/$dev.nobufs.trace
	check "$dev nobufs: IPv4 joins failed with ENOBUFS, in the trace" \
		test "$(grep -c "ipjoin join netdev=$nd .*ipv4=.*result=ENOBUFS(105)$" "$tr")" -ge 6
	check "$dev nobufs: IPv4 groups never left (never joined)" \
		test "$(grep -c "ipjoin leave .*ipv4=" "$tr")" -eq 0
	check "$dev nobufs: the IPv6 group joined and left" \
		test "$(grep -c "ipjoin \(join\|leave\) netdev=$nd .*mgid=ff0e::77:0:2 .*result=0$" "$tr")" -eq 2

	# The fabric join's engine (rdma_cm) on the same sequence. On lo the
	# kernel binds an rdma_cm ID to a loopback address without a device
	# (cma.c rdma_bind_addr_dst: cma_any_addr counts 127/8 as "any"), so
	# every join there is refused (EINVAL, ucma.c ucma_get_ctx_dev): no
	# membership, a trace line and a hint naming the step.
	cmx=10; [ "$nd" = lo ] && cmx=00
	one "$dev" "$nd" "$other" cm $cmx IPJOIN_HOLDER=cm RSVERBS_MCAST_FABRICJOIN=roce LD_PRELOAD="$RSVERBS_LIB" "$P"
	one "$dev" "$nd" "$other" cmrelinked $cmx IPJOIN_HOLDER=cm RSVERBS_MCAST_FABRICJOIN=roce "$P.rsv"
	one "$dev" "$nd" "$other" cmtraced $cmx IPJOIN_HOLDER=cm RSVERBS_MCAST_FABRICJOIN=roce \
		RSVERBS_TRACE="hints:$W/$dev.cmtraced.trace" LD_PRELOAD="$RSVERBS_LIB" "$P"
	one "$dev" "$nd" "$other" cmib 00 IPJOIN_HOLDER=cm RSVERBS_MCAST_FABRICJOIN=1 LD_PRELOAD="$RSVERBS_LIB" "$P"
	one "$dev" "$nd" "$other" cmqkey $cmx IPJOIN_HOLDER=cm IPJOIN_QKEY=0x01234567 RSVERBS_MCAST_FABRICJOIN=roce \
		RSVERBS_TRACE="hints:$W/$dev.cmqkey.trace" LD_PRELOAD="$RSVERBS_LIB" "$P"
	for m in cm cmrelinked cmtraced cmib cmqkey; do
		check "$dev $m: served by librsverbs" served "$W/$dev.$m" librsverbs.so.1
		check "$dev $m: return values and errno identical to rdma-core's" \
			diff -u "$W/$dev.ref.calls" "$W/$dev.$m.calls"
	done
	tr=$W/$dev.cmtraced.trace
	joins=$(grep -c "fabricjoin joined netdev=$nd .*ipv4=.* mlid=0x0000 qkey=0x01234567$" "$tr")
	leaves=$(grep -c "fabricjoin leave netdev=$nd .*result=0$" "$tr")
	refused=$(grep -c "fabricjoin join netdev=$nd .*step=join result=EINVAL(22)$" "$tr")
	hints=$(grep -c "hint\[fabric-join-failed\]: .* through $nd: EINVAL(22) at join (the ID has no device" "$tr")
	echo "ipjoin: $dev cmtraced: $joins joins, $leaves leaves, $refused refused on $nd"
	if [ "$nd" = lo ]; then
		check "$dev cmtraced: every join refused at the join step (loopback), each with its hint" \
			test "$joins:$leaves:$((refused > 0)):$hints" = "0:0:1:$refused"
		check "$dev cmtraced: no other fabricjoin line" test "$(grep -c 'fabricjoin ' "$tr")" -eq "$refused"
	else
		# The IPv4 groups of the sequence (1 3 4 6 9 7 8, and the fork
		# child's 7): joined once each, all left but 8 (detached by a child).
		check "$dev cmtraced: 8 joins (the kernel's event: MLID 0 and RDMA_UDP_QKEY on RoCE) and 7 leaves on $nd" \
			test "$joins:$leaves" = 8:7
		check "$dev cmtraced: no other fabricjoin line, no hint[fabric-join-failed]" \
			test "$(grep -c 'fabricjoin ' "$tr"):$hints" = 15:0
		check "$dev cmtraced: no hint[no-ip-join] (the fabric join made it)" \
			test "$(grep -c 'hint\[no-ip-join\]' "$tr")" -eq 0
		# The QPs' Q_Key is perftest's, the group's (rdma_cm's on RoCE)
		# 0x01234567: each join's answer names the mismatch; the twin whose
		# QPs have rdma_cm's Q_Key has none.
		check "$dev cmtraced: hint[qkey-mismatch] at each of the 8 joins (QP 0x11111111, group 0x1234567)" \
			test "$(grep -c 'hint\[qkey-mismatch\]: .*the group.s Q_Key is 0x1234567 .*the attached QP.s is 0x11111111' "$tr")" -eq 8
		check "$dev cmqkey: the twin with the group's Q_Key: 8 joins, no hint[qkey-mismatch]" \
			test "$(grep -c 'fabricjoin joined' "$W/$dev.cmqkey.trace"):$(grep -c 'hint\[qkey-mismatch\]' "$W/$dev.cmqkey.trace")" = 8:0

		# SIGKILL: the kernel leaves for the holder.
		coproc HOLD { exec env RSVERBS_MCAST_FABRICJOIN=roce LD_PRELOAD="$RSVERBS_LIB" "$P" --hold "$dev" 2>&1; }
		hold_pid=$HOLD_PID
		read -r -t "$TMO" held <&"${HOLD[0]}"
		check "$dev kill -9: the holder attached (got '${held:-}')" test "${held:-}" = held
		check "$dev kill -9: $nd joined the holder's group" test "$("$P" --member "$nd")" = 1
		kill -9 "$hold_pid"
		wait "$hold_pid" 2>/dev/null
		check "$dev kill -9: the group is gone once the holder is reaped" test "$("$P" --member "$nd")" = 0
	fi
	[ "$nd" = lo ] || cm_bytes "$dev" 192.0.2.1
	echo "ipjoin: $dev: 11 runs in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
done
finish
