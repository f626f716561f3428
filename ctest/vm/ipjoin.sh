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
	echo "ipjoin: $dev: 7 runs in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
done
finish
