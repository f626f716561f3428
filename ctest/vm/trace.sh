#!/usr/bin/env bash
# RSVERBS_TRACE, in the guest (docs/trace.md):
#  1. Every hint fires in its scenario (ctest/vm/trace.c) and stays silent
#     in its healthy twin; each scenario prints the same return values and
#     errno with tracing on and off.
#  2. One trace line per call: the calls of the five verbs, counted
#     independently by uretprobes on librsverbs (ctest/vm/uprobes.bash, as
#     compat.sh), equal the calls the trace lines stand
#     for (a collapsed line of empty entries "×N" stands for N) for the conformance
#     program (preloaded and relinked), mckey and ib_send_bw UD multicast,
#     and a full GID-table walk.
#  3. The suites named by TRACE_SUITES (default none) run again with
#     RSVERBS_TRACE=hints:FILE, under the names NAME_traced. Every other
#     suite runs traced in `make check-traced` (RSVERBS_TRACE_ALL,
#     ctest/guest_suite.sh), which .ci/run runs after make check; e.g.
#     TRACE_SUITES="conform diffrand" for a quick look.
# This suite sets RSVERBS_TRACE itself, per run: an inherited one is unset.
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
unset RSVERBS_TRACE
W=$(mktemp -d)
DEV=rxe1 NETDEV=dummy0 ADDR=192.0.2.1 ADDR_GID=0000:0000:0000:0000:0000:ffff:c000:0201
TO=${COMPAT_TIMEOUT:-90}
TRACE_SUITES=${TRACE_SUITES-}
T=$BIN/trace

cleanup() {
	local p
	for p in $(jobs -p); do kill "$p" 2>/dev/null; done # ours, still running
	probes_off
	ip addr del 239.7.7.2/32 dev $NETDEV 2>/dev/null
	ip -6 addr del ff0e::7ace:4/128 dev $NETDEV 2>/dev/null
	rm -rf "$RESULTS_DIR/trace" && mkdir -p "$RESULTS_DIR/trace" && cp -r "$W"/. "$RESULTS_DIR/trace/"
	rm -rf "$W"
}
trap cleanup EXIT

# ---- uretprobes on librsverbs' five verbs ----------------------------------
source "$(dirname "$0")/uprobes.bash"
if probes_on rsvtrace 8192 ="$RSVERBS_LIB"; then pass "uretprobes on librsverbs.so.1's five verbs"; else fail "cannot set uretprobes on librsverbs.so.1"; fi

# ---- 1. hints: each fires in its scenario, silent in its twin --------------
# scenario NAME ARGS...: runs trace.c preloaded with tracing off, then with
# RSVERBS_TRACE=hints:$W/NAME.trace (uretprobes on); the two stdouts must
# be identical, and the trace must have one line per verb call.
scenario() {
	local name=$1; shift
	probes_clear
	timeout -k 5 "$TO" env LD_PRELOAD="$RSVERBS_LIB" "$T" "$@" > "$W/$name.off" 2>&1
	probes_clear
	timeout -k 5 "$TO" env LD_PRELOAD="$RSVERBS_LIB" RSVERBS_TRACE="hints:$W/$name.trace" "$T" "$@" > "$W/$name.on" 2>&1
	local rc=$?
	if [ $rc -ne 0 ]; then fail "$name: trace $* exited $rc"; sed 's/^/    | /' "$W/$name.on" >&2; return; fi
	if cmp -s "$W/$name.off" "$W/$name.on"; then
		pass "$name: same return values and errno with tracing on and off ($(grep -c 'rc=' "$W/$name.on") calls)"
	else
		fail "$name: results differ with tracing on"; diff "$W/$name.off" "$W/$name.on" >&2
	fi
	counts_equal "$name" "$W/$name.trace"
	check "$name: every trace line is well formed" well_formed "$W/$name.trace"
}
hints_in() { grep -c "^rsverbs\[[0-9]*\]: hint\[$2\]: " "$W/$1.trace"; }
# fires NAME ID COUNT [REGEX]: exactly COUNT hint[ID] lines, matching REGEX.
fires() {
	local n; n=$(hints_in "$1" "$2")
	if [ "$n" = "$3" ] && { [ -z "${4:-}" ] || grep "hint\[$2\]" "$W/$1.trace" | grep -qE "$4"; }; then
		pass "$1: hint[$2] fires ($n)"
		grep -m1 "hint\[$2\]" "$W/$1.trace" | cut -c1-240
	else
		fail "$1: hint[$2]: $n lines, expected $3${4:+ matching '$4'}"; cat "$W/$1.trace" >&2
	fi
}
# silent NAME [ID]: no hint[ID] (no hint at all without ID).
silent() {
	local n; n=$(hints_in "$1" "${2:-[a-z-]*}")
	if [ "$n" = 0 ]; then pass "$1: hint[${2:-*}] silent"; else fail "$1: $n hint[${2:-*}] lines, expected none"; grep 'hint\[' "$W/$1.trace" >&2; fi
}

# no-ip-join: a raw attach on rxe1 (RoCE, dummy0) to a group dummy0 has not
# joined; the twin joins first with the command the hint suggests.
scenario noipjoin-v4 attach $DEV 239.7.7.1
fires noipjoin-v4 no-ip-join 1 "dummy0.*239\.7\.7\.1.*ip addr add 239\.7\.7\.1/32 dev dummy0 autojoin"
ip addr add 239.7.7.2/32 dev $NETDEV autojoin
check "ip addr ... autojoin: 239.7.7.2 listed on $NETDEV in /proc/net/igmp" grep -q 020707EF /proc/net/igmp
scenario joined-v4 attach $DEV 239.7.7.2
silent joined-v4
scenario noipjoin-v6 attach $DEV ff0e::7ace:3
fires noipjoin-v6 no-ip-join 1 "igmp6.*ip -6 addr add ff0e::7ace:3/128 dev dummy0 autojoin"
if ip -6 addr add ff0e::7ace:4/128 dev $NETDEV autojoin 2>"$W/autojoin6.err"; then
	scenario joined-v6 attach $DEV ff0e::7ace:4
	silent joined-v6
else
	fail "ip -6 addr add ff0e::7ace:4/128 dev $NETDEV autojoin: $(cat "$W/autojoin6.err")"
fi
# not-multicast / not-ud: EINVAL for each reason, and each silent on the other's EINVAL.
scenario notmc notmc $DEV
fires notmc not-multicast 1 "::ffff:192\.0\.2\.1"
silent notmc not-ud
scenario notud notud $DEV 239.7.7.2
fires notud not-ud 1 " is RC"
silent notud not-multicast
# lid-mismatch: detach with another LID than the attach.
scenario lidmismatch lidmismatch $DEV 239.7.7.2
fires lidmismatch lid-mismatch 1 "LID 0x1234 .*EINVAL\(22\).*LID 0x0000"
# The healthy twin of them all: attach, duplicate attach, detach, a detach
# of a group never attached (EINVAL), destroy.
scenario healthy healthy $DEV 239.7.7.2
silent healthy
# limit: rxe allows 56 QPs per group; the 57th attach is ENOMEM.
scenario limit57 limit $DEV 239.7.7.2 57
fires limit57 limit 1 "max_mcast_grp=[0-9]+ groups, max_mcast_qp_attach=56 "
check "limit57: 56 of 57 QPs attached" grep -q '^trace: 56 of 57 QPs attached$' "$W/limit57.on"
scenario limit56 limit $DEV 239.7.7.2 56
silent limit56
# still-attached: exit with a QP attached (its destroy answered EBUSY).
scenario exit exit $DEV 239.7.7.2
check "exit: the destroy of the attached QP answered EBUSY" grep -q '^trace: destroy-while-attached rc=16 ' "$W/exit.on"
fires exit still-attached 1 "at exit, QP 0x[0-9a-f]+ on rxe1 is still attached to 1 group\(s\): 239\.7\.7\.2 lid 0x0000\. ibv_destroy_qp"
# qkey-violations: a UD receiver with perftest's Q_Key 0x11111111 attaches
# 239.7.7.5 (joined at IP level by a socket of its own); a sender posts QN
# datagrams with rdma_cm's 0x01234567, then a marker with the receiver's.
# rxe drops each mismatching one and counts it in the port's qkey_viol_cntr
# (rxe_recv.c check_keys). The twin sends all with the receiver's Q_Key.
# rdma-core alone (no library) prints the same results as the library with
# tracing off and on.
QN=8
qkey_case() { # NAME SENDER_QKEY
	scenario "$1" qkey $DEV 239.7.7.5 $QN "$2"
	timeout -k 5 "$TO" "$T" qkey $DEV 239.7.7.5 $QN "$2" > "$W/$1.rdma-core" 2>&1
	if cmp -s "$W/$1.rdma-core" "$W/$1.off"; then
		pass "$1: rdma-core alone gives the same results ($(grep -c 'rc=' "$W/$1.rdma-core") calls)"
	else
		fail "$1: rdma-core alone differs"; diff "$W/$1.rdma-core" "$W/$1.off" >&2
	fi
	check "$1: the attach line shows the receiver's Q_Key" \
		grep -qE "ibv_attach_mcast dev=rxe1 port=1 qpn=0x[0-9a-f]+ qp_type=UD qkey=0x11111111 mgid=::ffff:239\.7\.7\.5 " "$W/$1.trace"
}
qkey_case qkey-bad 0x01234567
check "qkey-bad: only the marker completes; the counter rose by >= $QN" \
	grep -q "^trace: qkey completions=1 marker=yes counter-rose-by-$QN=yes$" "$W/qkey-bad.on"
fires qkey-bad qkey-violations 1 "hint\[qkey-violations\]: [0-9]+ datagram\(s\) reached port 1 of rxe1 with a Q_Key other than this QP's 0x11111111 while QP 0x[0-9a-f]+ had 239\.7\.7\.5 attached until its detach .*per port, not per QP.*this QP's 0x11111111 is perftest's"
n=$(sed -n "s/.*hint\[qkey-violations\]: \([0-9]*\) datagram.*/\1/p" "$W/qkey-bad.trace")
check "qkey-bad: the hint counts >= $QN datagrams (${n:-none})" [ "${n:-0}" -ge $QN ]
qkey_case qkey-ok 0x11111111
check "qkey-ok: all $((QN + 1)) complete; the counter did not move" \
	grep -q "^trace: qkey completions=$((QN + 1)) marker=yes counter-rose-by-$QN=no$" "$W/qkey-ok.on"
silent qkey-ok
# The IP-level joins end here: on RoCE every address of the netdev, these
# multicast ones too, is also a GID (kernel roce_gid_mgmt.c), and the suites
# below expect the standard table.
ip addr del 239.7.7.2/32 dev $NETDEV 2>/dev/null
ip -6 addr del ff0e::7ace:4/128 dev $NETDEV 2>/dev/null
# ENODATA collapsing: a full GID-table walk.
scenario walk walk $DEV
n=$(sed -n 's/^trace: walk \([0-9]*\) calls.*/\1/p' "$W/walk.on")
check "walk: a collapsed ENODATA line (index=A..B ... ×N)" grep -qE '^rsverbs\[[0-9]+\]: _ibv_query_gid_ex dev=rxe1 port=1 index=[0-9]+\.\.[0-9]+ flags=0x0 entry_size=32 result=ENODATA\(61\) ×[0-9]+$' "$W/walk.trace"
check "walk: the trace stands for the program's own $n calls" [ "$(trace_count "$W/walk.trace")" = "attach=0 detach=0 gid=${n:-x} qgid=0 table=0" ]
check "walk: fewer lines than calls ($(wc -l < "$W/walk.trace") lines for $n calls)" [ "$(wc -l < "$W/walk.trace")" -lt "${n:-0}" ]
check "walk: populated entries show gid, type and netdev" grep -qE 'index=0 flags=0x0 entry_size=32 result=0 gid=\S+ gid_type=RoCEv2 netdev=dummy0$' "$W/walk.trace"
# rsverbs_mcast_attachments: the registry, with tracing on; EOPNOTSUPP off.
probes_clear
RSVERBS_TRACE="$W/attachments.trace" LD_PRELOAD="$RSVERBS_LIB" "$T" attachments $DEV > "$W/attachments.on" 2>&1
LD_PRELOAD="$RSVERBS_LIB" "$T" attachments $DEV > "$W/attachments.off" 2>&1
check "rsverbs_mcast_attachments: two groups after three attaches (one duplicate)" \
	grep -q '^trace: attachments 2 errno=4242 ff0e::7ace:1/0 ff0e::7ace:2/0$' "$W/attachments.on"
check "rsverbs_mcast_attachments: one after a detach, none after both" \
	sh -c "grep -q '^trace: attachments-after-detach 1$' $W/attachments.on && grep -q '^trace: attachments-at-end 0$' $W/attachments.on"
check "rsverbs_mcast_attachments: NULL qp is -1/EINVAL" grep -q '^trace: attachments-null -1 errno=22$' "$W/attachments.on"
check "rsverbs_mcast_attachments: -1/EOPNOTSUPP with tracing off" grep -q '^trace: attachments -1 errno=95$' "$W/attachments.off"

# ---- 2. one line per call: conform, mckey, ib_send_bw UD multicast ---------
for mode in preload relinked; do
	bin=$BIN/conform pre=(env LD_PRELOAD="$RSVERBS_LIB")
	[ $mode = relinked ] && bin=$BIN/conform.rsv pre=(env)
	probes_clear
	timeout -k 5 300 "${pre[@]}" RSVERBS_TRACE="$W/conform-$mode.trace" "$bin" > "$W/conform-$mode.out" 2> "$W/conform-$mode.err"
	check "conform $mode under RSVERBS_TRACE=PATH (lines as with 1): $(wc -l < "$W/conform-$mode.out") case lines" [ "$(wc -l < "$W/conform-$mode.out")" -ge 100 ]
	counts_equal "conform $mode" "$W/conform-$mode.trace"
	check "conform $mode: trace lines well formed, no hints without 'hints'" well_formed "$W/conform-$mode.trace"
	check "conform $mode: no hint lines under RSVERBS_TRACE=PATH" [ "$(grep -c 'hint\[' "$W/conform-$mode.trace")" = 0 ]
done

exec {NAPFD}<> <(:)
nap() { read -r -t 0.1 -u $NAPFD; }
until_grep() { # SECONDS PID REGEX FILE
	local end=$((SECONDS + $1))
	while ((SECONDS < end)); do grep -qE "$3" "$4" 2>/dev/null && return 0; kill -0 "$2" 2>/dev/null || return 1; nap; done
	return 1
}
listening() {
	local hex _ a r st f
	printf -v hex ':%04X' "$1"
	for f in /proc/net/tcp /proc/net/tcp6; do
		while read -r _ a r st _; do [[ $a == *$hex && $st == 0A ]] && return 0; done < $f
	done
	return 1
}
until_ok() { local end=$((SECONDS + $1)) pid=$2; shift 2; while ((SECONDS < end)); do "$@" && return 0; kill -0 "$pid" 2>/dev/null || return 1; nap; done; return 1; }

# mckey: librdmacm attaches when it reads the join event, detaches in rdma_leave_multicast.
probes_clear
env LD_PRELOAD="$RSVERBS_LIB" RSVERBS_TRACE="hints:$W/mckey.trace" timeout -k 5 "$TO" stdbuf -oL mckey -m 239.2.2.2 -b $ADDR > "$W/mckey-recv" 2>&1 &
rpid=$!
if until_grep 60 $rpid '^receiving data transfers$' "$W/mckey-recv"; then
	env LD_PRELOAD="$RSVERBS_LIB" RSVERBS_TRACE="hints:$W/mckey.trace" timeout -k 5 "$TO" mckey -m 239.2.2.2 -b $ADDR -s > "$W/mckey-send" 2>&1
fi
wait $rpid
check "mckey (receiver and sender) under RSVERBS_TRACE: data transfers complete" \
	sh -c "grep -q '^data transfers complete$' $W/mckey-recv && grep -q '^data transfers complete$' $W/mckey-send"
counts_equal mckey "$W/mckey.trace"
check "mckey: the attach and detach librdmacm makes are traced" \
	sh -c "grep -q 'ibv_attach_mcast dev=rxe1 port=1 .* mgid=::ffff:239.2.2.2 ipv4=239.2.2.2 .* result=0 ' $W/mckey.trace && grep -q 'ibv_detach_mcast dev=rxe1 .* result=0 ' $W/mckey.trace"
silent_file() { ! grep -q "hint\[$2\]" "$1"; }
check "mckey: rdma_cm joins IPv4 groups at IP level, so no hint[no-ip-join]" silent_file "$W/mckey.trace" no-ip-join
check "mckey: rdma_leave_multicast detached, so no hint[still-attached]" silent_file "$W/mckey.trace" still-attached
check "mckey: sender and receiver use rdma_cm's Q_Key, so no hint[qkey-violations]" silent_file "$W/mckey.trace" qkey-violations

# ib_send_bw UD multicast (the server attaches, detaches at close), with an IP join held.
gidx=
for ((i = 0; i < 1024; i++)); do
	read -r g < /sys/class/infiniband/$DEV/ports/1/gids/$i 2>/dev/null || continue
	[ "$g" = $ADDR_GID ] && { gidx=$i; break; }
done
"$BIN/mcgroup" hold 239.3.3.3 $NETDEV > "$W/hold" 2>&1 &
hpid=$!
until_grep 30 $hpid holding "$W/hold" || fail "no IP-level membership of 239.3.3.3 on $NETDEV"
args=(-d "$DEV" -c UD --mcg -x "${gidx:-1}" -M 0:0:0:0:0:0:0:0:0:0:255:255:239:3:3:3 -n 100 -F -p 18700)
probes_clear
env LD_PRELOAD="$RSVERBS_LIB" RSVERBS_TRACE="hints:$W/ib_send_bw.trace" timeout -k 5 "$TO" ib_send_bw "${args[@]}" > "$W/ib_send_bw-server" 2>&1 &
spid=$!
if until_ok 60 $spid listening 18700; then
	env LD_PRELOAD="$RSVERBS_LIB" RSVERBS_TRACE="hints:$W/ib_send_bw.trace" timeout -k 5 "$TO" ib_send_bw "${args[@]}" $ADDR > "$W/ib_send_bw-client" 2>&1
fi
wait $spid
kill $hpid 2>/dev/null; wait $hpid 2>/dev/null
check "ib_send_bw UD multicast under RSVERBS_TRACE=hints: 100 iterations on both sides" \
	sh -c "grep -qE '^ 1024 +100 ' $W/ib_send_bw-server && grep -qE '^ 1024 +100 ' $W/ib_send_bw-client"
counts_equal "ib_send_bw UD multicast" "$W/ib_send_bw.trace"
check "ib_send_bw UD multicast: perftest's own ibv_query_gid of its -x index is traced" \
	grep -qE "^rsverbs\[[0-9]+\]: ibv_query_gid dev=rxe1 port=1 index=${gidx:-1} result=0 gid=::ffff:192\.0\.2\.1$" "$W/ib_send_bw.trace"
check "ib_send_bw UD multicast: joined at IP level, so no hint[no-ip-join]" silent_file "$W/ib_send_bw.trace" no-ip-join
check "ib_send_bw UD multicast: detached before exit, so no hint[still-attached]" silent_file "$W/ib_send_bw.trace" still-attached
check "ib_send_bw UD multicast: both sides use perftest's Q_Key, so no hint[qkey-violations]" silent_file "$W/ib_send_bw.trace" qkey-violations
probes_off

# ---- 3. the existing suites, traced -------------------------------------------
for s in $TRACE_SUITES; do
	[ -f "$(dirname "$0")/$s.sh" ] || { fail "no suite $s"; continue; }
	echo "trace: running suite $s with RSVERBS_TRACE=hints:FILE as ${s}_traced"
	start=$(date +%s)
	# diffrand traced with the matrix's per-cell operation counts (13,500
	# compared operations), to keep make check near ten minutes; the
	# full counts: TRACE_DIFFRAND_OPS=15000 TRACE_DIFFRAND_FALLBACK_OPS=4000.
	if RSVERBS_TRACE="hints:$W/suite-$s.trace" SUITE="${s}_traced" \
		DIFFRAND_OPS=${TRACE_DIFFRAND_OPS:-2500} DIFFRAND_FALLBACK_OPS=${TRACE_DIFFRAND_FALLBACK_OPS:-1000} \
		bash "$(dirname "$0")/$s.sh" > "$W/suite-$s.log" 2>&1; then
		pass "suite $s passes under RSVERBS_TRACE=hints ($(tail -1 "$W/suite-$s.log"), $(( $(date +%s) - start )) s)"
	else
		fail "suite $s fails under RSVERBS_TRACE=hints: $(tail -1 "$W/suite-$s.log")"; grep '^FAIL' "$W/suite-$s.log" | head -20 >&2
	fi
	lines=$(wc -l < "$W/suite-$s.trace" 2>/dev/null || echo 0)
	echo "trace: suite $s: $lines trace lines, $(grep -c 'hint\[' "$W/suite-$s.trace" 2>/dev/null) hints"
	if [ "$lines" -gt 0 ] && well_formed "$W/suite-$s.trace"; then
		pass "suite $s traced: $lines trace lines, every one well formed"
	else
		fail "suite $s traced: no trace, or malformed lines"
	fi
done
gzip -q "$W"/suite-*.trace 2>/dev/null
finish
