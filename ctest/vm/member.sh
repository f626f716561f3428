#!/usr/bin/env bash
# Explicit multicast membership (rsverbs_mcast_join(3), docs/fabric-join.md
# "Explicit membership"), in the guest, on rxe1 (dummy0, 192.0.2.1),
# side by side with librdmacm's rdma_join_multicast_ex in the same boot
# (ctest/vm/member.c):
#   seq       the same joins and leaves of an IPv4 group (full and
#             send-only members, a leave of what is not held, bad flags)
#             through librdmacm and through rsverbs, preloaded and relinked,
#             with rsverbs' socket engine and with its rdma_cm engine
#             (RSVERBS_MCAST_FABRICJOIN=roce): every step's answer and the
#             group's IGMP membership after it identical to librdmacm's.
#             A send-only member sends no IGMP report (cma.c
#             cma_iboe_join_multicast) and its leave ends nobody's
#             membership (2cc74e1ee31d, 5.15).
#   extra     rsverbs only: counted joins, IPv6, the bad arguments, errno
#             on success, a forked child.
#   across    a full member holds the group in one process while another
#             joins and leaves as a send-only member, each side through
#             librdmacm or rsverbs (both engines): the holder stays a
#             member (the 2cc74e1ee31d regression, across processes).
#   kill      a holder killed with SIGKILL: the group is gone once it is
#             reaped (its sockets or rdma_cm fd closed by the kernel).
#   traced    RSVERBS_TRACE=FILE: a "member join"/"member leave" line for
#             each call past the argument checks, with its kind and result.
#   privdrop  a credential change (docs/fabric-join.md): a program attaches and joins as root,
#             drops to nobody (setgroups, setresgid, setresuid), then
#             attaches, detaches and leaves again. librdmacm's calls after
#             the drop answer EACCES (the kernel's rule: ucma_write,
#             ib_safe_file_access) and the group it left stays joined;
#             rsverbs (RSVERBS_MCAST_FABRICJOIN=roce, preloaded and
#             relinked, traced with hints) ends with every membership asked
#             for and none left, in /proc/net/igmp, and its trace tells the
#             fd replaced, with hint[fabric-join-cred-change].
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
W=$(mktemp -d)
trap 'rm -rf "$RESULTS_DIR/member" && mkdir -p "$RESULTS_DIR/member" && cp -r "$W"/. "$RESULTS_DIR/member/"; rm -rf "$W"' EXIT
P=$BIN/member
DEV=${MEMBER_DEV:-rxe1} ND=${MEMBER_NET:-dummy0}
ADDR=$(ip -4 -o addr show dev "$ND" | awk '{ sub(/\/.*/, "", $4); print $4; exit }')
TMO=${MEMBER_TIMEOUT:-60}
G=239.77.5.9

check "the bind address of $ND ($ADDR)" test -n "$ADDR"

# held: whether G is in /proc/net/igmp on ND; gone: whether it is not.
held() { igmp_held "$ND" "$G"; }
gone() { ! held; }

# hold ENV LIB: a full member of G in its own process (member.c hold), its
# stdout on fd $hout and stdin on fd $hin (copies: bash closes a coproc's
# own fds when it ends), once it has joined.
hold() {
	local line=""
	coproc HOLD { exec env ${1:+"$1"} LD_PRELOAD="$RSVERBS_LIB" "$P" "$DEV" "$ND" "$ADDR" hold full "$2" "$G" 2>> "$W/hold.err"; }
	hold_pid=$HOLD_PID # bash unsets HOLD_PID once the coproc has ended
	exec {hout}<&"${HOLD[0]}" {hin}>&"${HOLD[1]}"
	read -r -t 30 -u "$hout" line
	read -r -t 30 -u "$hout" line
	[ "$line" = held ]
}

# seq LABEL LIB ENV... -- PROGRAM: the sequence, its step lines kept.
seq_run() {
	local label=$1 lib=$2; shift 2
	timeout "$TMO" env "$@" "$DEV" "$ND" "$ADDR" seq "$lib" > "$W/seq.$label" 2> "$W/seq.$label.err"
	local rc=$?
	check "seq $label: exits 0 (rc $rc)" test $rc -eq 0
	[ $rc -eq 0 ] || tail -3 "$W/seq.$label.err" >&2
}
seq_run rdmacm rdmacm -- "$P"
check "seq rdmacm: librdmacm's 9 steps" test "$(grep -c '^step ' "$W/seq.rdmacm")" -eq 9
check "seq rdmacm: its send-only member sends no IGMP report, its full member does" \
	grep -qx 'step join-sendonly rc=0 errno=0 member=0' "$W/seq.rdmacm"
check "seq rdmacm: a send-only leave keeps the full member's group (2cc74e1ee31d)" \
	grep -qx 'step leave-sendonly rc=0 errno=0 member=1' "$W/seq.rdmacm"
check "seq rdmacm: a leave of what is not held is EADDRNOTAVAIL (99)" \
	grep -qx 'step leave-not-joined rc=-1 errno=99 member=0' "$W/seq.rdmacm"
seq_run preload rsverbs LD_PRELOAD="$RSVERBS_LIB" "$P"
seq_run relinked rsverbs -- "$P.rsv"
seq_run cm rsverbs RSVERBS_MCAST_FABRICJOIN=roce LD_PRELOAD="$RSVERBS_LIB" "$P"
seq_run cmrelinked rsverbs RSVERBS_MCAST_FABRICJOIN=roce "$P.rsv"
for m in preload relinked cm cmrelinked; do
	check "seq $m: served by librsverbs" grep -q 'served-by ibv_attach_mcast=librsverbs.so.1' "$W/seq.$m.err"
	check "seq $m: every answer and membership is librdmacm's" diff -u "$W/seq.rdmacm" "$W/seq.$m"
done
without_rsverbs() { "$P" "$DEV" "$ND" "$ADDR" seq rsverbs > /dev/null 2>&1; test $? -eq 2; }
check "seq: rsverbs' functions are not there without rsverbs (exit 2)" without_rsverbs

for m in preload:LD_PRELOAD="$RSVERBS_LIB":"$P" relinked:X=1:"$P.rsv" cm:RSVERBS_MCAST_FABRICJOIN=roce:"$P.rsv"; do
	IFS=: read -r label e prog <<< "$m"
	timeout "$TMO" env "$e" "$prog" "$DEV" "$ND" "$ADDR" extra rsverbs > "$W/extra.$label" 2> "$W/extra.$label.err"
	rc=$?
	check "extra $label: every check holds (rc $rc)" test $rc -eq 0 -a "$(grep -c '^extra done' "$W/extra.$label")" -eq 1
	grep '^FAIL' "$W/extra.$label" | sed "s/^/member: extra $label: /" >&2
done


# across HOLDER_LIB HOLDER_ENV SENDER_LIB SENDER_ENV: a full member holds G
# while a send-only member joins and leaves it in another process.
across() {
	local hl=$1 he=$2 sl=$3 se=$4 label="$1${2:+($2)}+$3${4:+($4)}" after
	check "across $label: the holder joined" hold "$he" "$hl"
	check "across $label: the holder's group is on $ND" held
	timeout "$TMO" env ${se:+"$se"} LD_PRELOAD="$RSVERBS_LIB" "$P" "$DEV" "$ND" "$ADDR" once sendonly "$sl" "$G" > "$W/across.sender" 2>&1
	check "across $label: the send-only member joined and left, adding nothing" \
		test "$(grep -c '^step \(join\|leave\) rc=0 errno=0 member=1$' "$W/across.sender")" -eq 2
	check "across $label: the holder's group is still on $ND" held
	echo go >&"$hin"
	after=$(cat <&"$hout")
	wait "$hold_pid" 2>/dev/null
	exec {hout}<&- {hin}>&-
	check "across $label: the holder saw itself a member to the end" grep -q '^after member=1$' <<<"$after"
	check "across $label: after the holder's leave, the group is gone" gone
}
across rsverbs "" rdmacm ""
across rdmacm "" rsverbs RSVERBS_MCAST_FABRICJOIN=roce
across rsverbs RSVERBS_MCAST_FABRICJOIN=roce rsverbs RSVERBS_MCAST_FABRICJOIN=roce
across rsverbs RSVERBS_MCAST_FABRICJOIN=roce rsverbs ""

# kill: the kernel ends a killed holder's membership with its fds.
for e in "" RSVERBS_MCAST_FABRICJOIN=roce; do
	check "kill ${e:-sockets}: the holder joined" hold "$e" rsverbs
	check "kill ${e:-sockets}: its group is on $ND" held
	kill -9 "$hold_pid"
	wait "$hold_pid" 2>/dev/null
	exec {hout}<&- {hin}>&-
	check "kill ${e:-sockets}: the group is gone once the holder is reaped" gone
done

# traced: one line per call.
tr=$W/traced.trace
timeout "$TMO" env RSVERBS_TRACE="$tr" LD_PRELOAD="$RSVERBS_LIB" "$P" "$DEV" "$ND" "$ADDR" seq rsverbs > "$W/seq.traced" 2> "$W/seq.traced.err"
check "traced: the answers are the untraced run's" diff -u "$W/seq.preload" "$W/seq.traced"
# 8: the join with bad flags is refused at the door (EINVAL), untraced.
check "traced: a member line for each of the 8 calls past the door ($(grep -c ' member ' "$tr" 2>/dev/null) lines)" \
	test "$(grep -c " member \(join\|leave\) dev=$DEV port=1 .* as=\(full\|sendonly\) result=" "$tr")" -eq 8
check "traced: the send-only join's line" grep -q " member join dev=$DEV port=1 .* as=sendonly result=0$" "$tr"
check "traced: the refused leave's line names EADDRNOTAVAIL" grep -q " member leave .* as=full result=EADDRNOTAVAIL(99)$" "$tr"
# privdrop: a privilege drop after the rdma_cm fd was opened as root.
PU=$(id -u nobody)
timeout "$TMO" "$P" "$DEV" "$ND" "$ADDR" privdrop rdmacm "$PU" > "$W/privdrop.rdmacm" 2> "$W/privdrop.rdmacm.err"
check "privdrop rdmacm: runs (rc $?)" grep -q "^dropped uid=$PU" "$W/privdrop.rdmacm"
for s in leave-after-drop join-after-drop leave-sendonly-after-drop; do
	check "privdrop rdmacm: $s answers EACCES (13): the kernel's rule" grep -q "^step $s rc=-1 errno=13 " "$W/privdrop.rdmacm"
done
check "privdrop rdmacm: the group it left after the drop stays joined" grep -qx 'final joined-then-left member=1' "$W/privdrop.rdmacm"
check "privdrop rdmacm: the group it joined after the drop is not" grep -qx 'final joined-after member=0' "$W/privdrop.rdmacm"
dmesg 2>/dev/null | grep -m1 'changed security contexts' > "$W/privdrop.dmesg" || true
for m in preload:LD_PRELOAD="$RSVERBS_LIB":"$P" relinked:X=1:"$P.rsv"; do
	IFS=: read -r label e prog <<< "$m"
	tr=$W/privdrop.$label.trace
	rm -f "$tr"
	timeout "$TMO" env "$e" RSVERBS_MCAST_FABRICJOIN=roce RSVERBS_TRACE="hints:$tr" "$prog" "$DEV" "$ND" "$ADDR" privdrop rsverbs "$PU" \
		> "$W/privdrop.$label" 2> "$W/privdrop.$label.err"
	rc=$?
	check "privdrop $label: exits 0 (rc $rc)" test $rc -eq 0
	check "privdrop $label: dropped to nobody" grep -q "^dropped uid=$PU" "$W/privdrop.$label"
	check "privdrop $label: every call answered 0 ($(grep -c '^step .* rc=0 ' "$W/privdrop.$label") of 10)" \
		test "$(grep -c '^step .* rc=0 errno=0 ' "$W/privdrop.$label")" -eq 10
	for f in attached-then-detached:0 joined-then-left:0 attached-kept:1 joined-kept:1 sendonly-then-left:0 attached-after:1 joined-after:1; do
		check "privdrop $label: ${f%:*} ends member=${f#*:} in /proc/net/igmp" grep -qx "final ${f%:*} member=${f#*:}" "$W/privdrop.$label"
	done
	check "privdrop $label: the 5 memberships held are told lost at cred-change ($(grep -c 'fabricjoin lost .* step=cred-change result=EACCES(13)$' "$tr" 2>/dev/null))" \
		test "$(grep -c 'fabricjoin lost .* step=cred-change result=EACCES(13)$' "$tr")" -eq 5
	check "privdrop $label: the fd is replaced, all 5 joined again" \
		grep -q 'fabricjoin replaced the rdma_cm fd: cause=cred-change .* held=5 rejoined=5 result=0$' "$tr"
	check "privdrop $label: one hint names the privilege drop and the replacement" \
		test "$(grep -c 'hint\[fabric-join-cred-change\]: .*privilege drop.*closed the fd (the kernel left its 5 groups with it), opened a new one with the new credentials and joined again 5 of the 5 memberships it held' "$tr")" -eq 1
	check "privdrop $label: no hint[fabric-join-failed]" test "$(grep -c 'hint\[fabric-join-failed\]' "$tr")" -eq 0
done
finish
