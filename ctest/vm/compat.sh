#!/usr/bin/env bash
# Compatibility, in the guest: real clients on rsverbs. Unmodified Debian
# binaries (mckey of rdmacm-utils, ib_send_bw and ib_send_lat of perftest)
# and our example ctest/vm/mcgroup.c, each run in this boot with rdma-core
# alone ("ref") and with LD_PRELOAD=librsverbs.so.1 ("pre"); mcgroup also
# relinked with `pkg-config --libs rsverbs` ("rsv").
#
# Besides each client's own success lines and exit status, two witnesses:
#  - uretprobes on both libraries' ibv_attach_mcast, ibv_detach_mcast,
#    _ibv_query_gid_ex, ibv_query_gid and _ibv_query_gid_table record every
#    call and its return value (perftest's GID auto-selection makes about
#    4,000 ibv_query_gid calls; libibverbs, providers and librdmacm make
#    theirs through the same symbol, so they count too). A preloaded
#    or relinked run must make the same calls with the same results as the
#    rdma-core run, all in librsverbs, none in libibverbs.
#  - LD_DEBUG=bindings of each preloaded client shows the dynamic linker
#    binding the verbs to librsverbs.so.1.
# Every program runs under `timeout`; a hang is a failure that says so.
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
T0=$(date +%s)
LAP=$T0
lap() { echo "compat: $1 took $(($(date +%s) - LAP)) s"; LAP=$(date +%s); }
W=$(mktemp -d)
DEV=rxe1 NETDEV=dummy0 ADDR=192.0.2.1 ADDR_GID=0000:0000:0000:0000:0000:ffff:c000:0201
TO=${COMPAT_TIMEOUT:-90} # seconds, for any one program (slower kernels need more)
LIBIBVERBS=$(ldd "$(command -v ib_send_bw)" | awk '$1 == "libibverbs.so.1" { print $3 }')

cleanup() {
	local p
	for p in $(jobs -p); do kill "$p" 2>/dev/null; done # still running: ours
	probes_off
	# Every output, for a post-mortem, but not the bulky LD_DEBUG logs
	# (bound() keeps their relevant lines in TAG.bindings).
	rm -f "$W"/*.ldd.*
	rm -rf "$RESULTS_DIR/compat" && mkdir -p "$RESULTS_DIR/compat" && cp -r "$W"/. "$RESULTS_DIR/compat/"
	rm -rf "$W"
}
trap cleanup EXIT

# ---- uretprobes ----------------------------------------------------------
source "$(dirname "$0")/uprobes.bash"
# The calls since probes_clear, one line per library/verb/return value:
# "ibv_gid rc=0 x1022".
probes_read() {
	awk '!/^#/ { for (i = 1; i <= NF; i++) if ($i ~ /^(rsv|ibv)_(attach|detach|gid|qgid|table):$/) {
		sub(/:$/, "", $i); n[$i " " $NF]++ } }
		END { for (k in n) print k " x" n[k] }' $TR/trace | sort > "$1"
}
# calls_same NAME REF OTHER MODE: the other run's calls, all in librsverbs,
# are the reference run's calls, all in libibverbs.
calls_same() {
	local -a a b
	mapfile -t a < "$2"
	mapfile -t b < "$3"
	local ref=${a[*]} other=${b[*]}
	echo "compat: $1 calls, rdma-core: $ref"
	echo "compat: $1 calls, $4: $other"
	if [ -z "$ref" ] || [[ " $ref" = *" rsv_"* ]]; then
		fail "$1: the rdma-core run made no verb call, or one in librsverbs"
	elif [ "${ref//ibv_/}" = "${other//rsv_/}" ] && [[ " $other" != *" ibv_"* ]]; then
		pass "$1 $4: same verb calls and return values as rdma-core, all served by librsverbs"
	else
		fail "$1 $4: verb calls differ from rdma-core's (or some went to libibverbs)"
	fi
}

# ---- running programs ------------------------------------------------------
# modeenv MODE TAG: sets ENV, the env(1) prefix of a run in that mode:
# ref (rdma-core alone), pre (preloaded, with LD_DEBUG=bindings into
# $W/TAG.ldd.PID), quiet-pre (preloaded only).
modeenv() {
	ENV=(env)
	case $1 in
	pre) ENV+=(LD_PRELOAD="$RSVERBS_LIB" LD_DEBUG=bindings LD_DEBUG_OUTPUT="$W/$2.ldd") ;;
	quiet-pre) ENV+=(LD_PRELOAD="$RSVERBS_LIB") ;;
	esac
}
# fg TAG MODE CMD...: runs CMD bounded, output in $W/TAG; sets RC.
fg() {
	local tag=$1 mode=$2; shift 2
	modeenv "$mode" "$tag"
	timeout -k 5 "$TO" "${ENV[@]}" "$@" > "$W/$tag" 2>&1
	RC=$?
	[ $RC -eq 124 ] && echo "timed out after $TO s" >> "$W/$tag"
}
# bg TAG MODE CMD...: the same in the background; sets PID.
bg() {
	local tag=$1 mode=$2; shift 2
	modeenv "$mode" "$tag"
	timeout -k 5 "$TO" "${ENV[@]}" stdbuf -oL -eL "$@" > "$W/$tag" 2>&1 &
	PID=$!
}
# reap PID TAG: waits for a background run; sets RC.
reap() {
	wait "$1"
	RC=$?
	[ $RC -eq 124 ] && echo "timed out after $TO s" >> "$W/$2"
}
# The helpers below use shell builtins only: under TCG every process start
# costs a tenth of a second or more.
exec {NAPFD}<> <(:)
nap() { read -r -t 0.1 -u $NAPFD; } # sleep 0.1 without a process
# has_line FILE REGEX: some line of FILE matches the bash (extended) REGEX.
has_line() {
	local l
	while IFS= read -r l || [ -n "$l" ]; do [[ $l =~ $2 ]] && return 0; done < "$1"
	return 1
}
# until_ok SECONDS PID CMD...: polls CMD every 0.1 s while PID lives.
until_ok() {
	local end=$((SECONDS + $1)) pid=$2; shift 2
	while ((SECONDS < end)); do
		"$@" && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		nap
	done
	return 1
}
listening() { # PORT: a TCP socket listens on it
	local hex _ a r st
	printf -v hex ':%04X' "$1"
	for f in /proc/net/tcp /proc/net/tcp6; do
		while read -r _ a r st _; do [[ $a == *$hex && $st == 0A ]] && return 0; done < $f
	done
	return 1
}
show() { local l; while IFS= read -r l; do echo "    | $l"; done < "$W/$1" >&2; }
expect() { # TAG DESCRIPTION REGEX
	if has_line "$W/$1" "$3"; then pass "$1: $2"; else fail "$1: $2 (no line matching '$3')"; show "$1"; fi
}
status0() { # TAG RC
	if [ "$2" -eq 0 ]; then pass "$1: exit status 0"; else fail "$1: exit status $2"; show "$1"; fi
}
# bound TAG OBJ SYMBOL VERSION: the preloaded run's LD_DEBUG output binds
# OBJ's reference to SYMBOL to librsverbs.so.1, and nothing to libibverbs.
bound() {
	local lines
	lines=$(cat "$W/$1.ldd".* 2>/dev/null | grep -F "normal symbol \`$3' [$4]")
	echo "$lines" >> "$W/$1.bindings"
	if grep -q "binding file [^ ]*$2 \[0\] to $RSVERBS_LIB \[0\]" <<< "$lines" &&
		! grep -q "to [^ ]*libibverbs.so.1 \[0\]" <<< "$lines"; then
		pass "$1: LD_DEBUG=bindings binds $2's $3@$4 to librsverbs.so.1"
	else
		fail "$1: $2's $3@$4 is not bound to librsverbs.so.1"
		grep -F "\`$3'" <<< "$lines" | head -5 >&2
	fi
}

echo "compat: kernel $(uname -r), rdma-core $(dpkg-query -W -f='${Version}' libibverbs1 2>/dev/null)," \
	"perftest $(dpkg-query -W -f='${Version}' perftest 2>/dev/null)"
if probes_on rsvcompat 4096 rsv="$RSVERBS_LIB" ibv="$LIBIBVERBS"; then
	pass "uretprobes on the verbs of librsverbs.so.1 and $(basename "$LIBIBVERBS")"
else
	fail "cannot set uretprobes on the verbs (tracefs/uprobe_events)"
fi
lap "setup"

# ---- 1. our example: mcgroup, three ways -----------------------------------
for group in 239.4.4.4 ff0e::4:4; do
	for mode in ref pre rsv; do
		tag=mcgroup-$group-$mode bin=$BIN/mcgroup
		[ $mode = rsv ] && bin=$BIN/mcgroup.rsv
		probes_clear
		fg "$tag" "$([ $mode = pre ] && echo quiet-pre || echo ref)" "$bin" -d $DEV -g $group -n 10 -t 30
		probes_read "$W/$tag.calls"
		status0 "$tag" $RC
		expect "$tag" "10 of 10 datagrams while attached" 'while attached: sent 10, received 10, witness received 10$'
		expect "$tag" "none after detach, witness still gets 10" 'after detach: +sent 10, received 0, witness received 10$'
		lib=librsverbs.so.1
		[ $mode = ref ] && lib=libibverbs.so.1
		expect "$tag" "dladdr: every verb served by $lib" \
			"served by: ibv_attach_mcast=$lib ibv_detach_mcast=$lib _ibv_query_gid_ex=$lib\$"
	done
	calls_same "mcgroup $group" "$W/mcgroup-$group-ref.calls" "$W/mcgroup-$group-pre.calls" preload
	calls_same "mcgroup $group" "$W/mcgroup-$group-ref.calls" "$W/mcgroup-$group-rsv.calls" relinked
done
grep -h '^mcgroup:' "$W/mcgroup-239.4.4.4-rsv"
lap "mcgroup (6 runs)"

# ---- 2. mckey (librdmacm joins, attaches and detaches) ---------------------
# The receiver is rdmacm-utils' mckey. The sender is ctest/vm/cmsend.c, mckey's
# sender but waiting for its sends to complete before it leaves: mckey -s
# leaves and exits right after posting, and from Linux 6.x rxe sends from a
# workqueue and flushes the rest at destroy, so on 6.12 and 7.2 it often put
# 1 of its 10 datagrams on the wire, with rdma-core alone as with rsverbs
# (testbed/README.md). Both go through librdmacm, which attaches and detaches.
for mode in ref pre; do
	r=mckey-recv-$mode s=cmsend-$mode
	probes_clear
	bg "$r" $mode mckey -m 239.2.2.2 -b $ADDR
	rpid=$PID
	SRC=0
	# The sender's datagrams are lost unless the receiver has joined.
	if until_ok 60 $rpid has_line "$W/$r" '^receiving data transfers$'; then
		fg "$s" $mode "$BIN/cmsend" -m 239.2.2.2 -b $ADDR -C 10
		SRC=$RC
	else
		echo "never ready to receive" >> "$W/$r"
		kill "$rpid" 2>/dev/null
	fi
	reap $rpid "$r"
	status0 "$s" $SRC
	status0 "$r" $RC
	probes_read "$W/mckey-$mode.calls"
	expect "$r" "joined" '^mckey: joined dgid: ::ffff:239\.2\.2\.2 mlid 0x0 sl 0$'
	expect "$r" "data transfers complete" '^data transfers complete$'
	expect "$r" "return status 0" '^return status 0$'
	expect "$s" "joined" '^cmsend: joined dgid: ::ffff:239\.2\.2\.2$'
	expect "$s" "10 sent and completed" '^cmsend: sent 10, completed 10, failed 0$'
done
calls_same mckey "$W/mckey-ref.calls" "$W/mckey-pre.calls" preload
for t in mckey-recv-pre cmsend-pre; do
	bound $t librdmacm.so.1 ibv_attach_mcast IBVERBS_1.1
	bound $t librdmacm.so.1 ibv_detach_mcast IBVERBS_1.1
done

lap "mckey (2 pairs)"

# ---- 3. perftest UD multicast (the server attaches, and detaches at close) -
gidx=
for ((i = 0; i < 1024; i++)); do
	read -r g < /sys/class/infiniband/$DEV/ports/1/gids/$i 2>/dev/null || continue
	[ "$g" = $ADDR_GID ] && { gidx=$i; break; }
done
echo "compat: $DEV GID index of $ADDR: ${gidx:-none}"
# rxe sends a multicast datagram through the IP stack, which loops it back
# only to a host that holds the group at IP level (ip_mc_output): perftest
# attaches but does not join, so mcgroup holds both groups below.
holds=
for g in 239.3.3.3 239.3.3.4; do
	bg hold-$g ref "$BIN/mcgroup" hold $g $NETDEV
	holds+=" $PID"
	until_ok 30 $PID has_line "$W/hold-$g" holding || fail "no IP-level membership of $g on $NETDEV"
done
# ib_send_lat's two sides each attach their -M and send to the other's, so
# each side has its own group: with one -M for both, both processes attach
# the same MGID at the same moment, which Linux 5.10's rxe races on
# (rxe_mcast_get_grp looks the group up and inserts it without a lock
# between: "rdma_rxe: key already exists!" in dmesg, and one QP's attach
# answers 0 but it never receives: its server then waited for ever, in 4
# of 6 boots of the sid:bullseye cell, rdma-core alone as with rsverbs;
# testbed/README.md). ib_send_bw's client only sends.
mgid() { echo "0:0:0:0:0:0:0:0:0:0:255:255:${1//./:}"; }
MG3=$(mgid 239.3.3.3) MG4=$(mgid 239.3.3.4)
port=18600
for tool in ib_send_bw ib_send_lat; do
	[ $tool = ib_send_bw ] && row='^ 1024 +100 ' || row='^ 2 +100 '
	for mode in ref pre; do
		port=$((port + 1))
		args=(-d "$DEV" -c UD --mcg -x "${gidx:-1}" -n 100 -F -p "$port")
		smg=$MG3 cmg=$MG3
		[ $tool = ib_send_lat ] && cmg=$MG4
		sv=$tool-mcg-server-$mode cl=$tool-mcg-client-$mode
		probes_clear
		bg "$sv" $mode $tool "${args[@]}" -M "$smg"
		spid=$PID
		if until_ok 60 $spid listening $port; then
			fg "$cl" $mode $tool "${args[@]}" -M "$cmg" $ADDR
			status0 "$cl" $RC
		else
			fail "$sv: never listened on port $port"
			RC=1
		fi
		[ "$RC" -eq 0 ] || kill "$spid" 2>/dev/null
		reap $spid "$sv"
		status0 "$sv" $RC
		probes_read "$W/$tool-mcg-$mode.calls"
		for t in "$sv" "$cl"; do
			expect "$t" "100 multicast iterations reported" "$row"
			if has_line "$W/$t" "Couldn't"; then fail "$t: reports a failure"; show "$t"; fi
		done
	done
	has_line "$W/$tool-mcg-ref.calls" '^ibv_detach rc=0 ' || fail "$tool: the rdma-core server did not detach"
	calls_same "$tool multicast" "$W/$tool-mcg-ref.calls" "$W/$tool-mcg-pre.calls" preload
	bound $tool-mcg-server-pre $tool ibv_attach_mcast IBVERBS_1.1
	bound $tool-mcg-server-pre $tool ibv_detach_mcast IBVERBS_1.1
done
kill $holds 2>/dev/null
wait $holds 2>/dev/null
lap "perftest multicast (4 pairs)"

# ---- 4. perftest GID auto-selection (no -x: ~2000 _ibv_query_gid_ex) ------
gidlines() { grep -E 'GID index|Link type|Device|GID:' "$W/$1"; }
for ip in ipv4 ipv6; do
	flag=()
	[ $ip = ipv6 ] && flag=(--ipv6)
	for mode in ref pre; do
		port=$((port + 1))
		sv=ib_send_bw-$ip-server-$mode cl=ib_send_bw-$ip-client-$mode
		probes_clear
		bg "$sv" $mode ib_send_bw -d $DEV "${flag[@]}" -n 5 -F -p $port
		spid=$PID
		if until_ok 60 $spid listening $port; then
			fg "$cl" $mode ib_send_bw -d $DEV "${flag[@]}" -n 5 -F -p $port $ADDR
			status0 "$cl" $RC
		else
			fail "$sv: never listened on port $port"
			RC=1
		fi
		[ "$RC" -eq 0 ] || kill "$spid" 2>/dev/null
		reap $spid "$sv"
		status0 "$sv" $RC
		probes_read "$W/ib_send_bw-$ip-$mode.calls"
		for t in "$sv" "$cl"; do expect "$t" "5 iterations reported" '^ 65536 +5 '; done
	done
	for side in server client; do
		ta=ib_send_bw-$ip-$side-ref tb=ib_send_bw-$ip-$side-pre
		if [ -n "$(gidlines "$ta")" ] && [ "$(gidlines "$ta")" = "$(gidlines "$tb")" ]; then
			pass "ib_send_bw $ip $side: GID selection identical to rdma-core's"
			gidlines "$tb" | sed "s/^/compat: ib_send_bw $ip $side:/"
		else
			fail "ib_send_bw $ip $side: GID selection differs"
			diff <(gidlines "$ta") <(gidlines "$tb") >&2
		fi
	done
	calls_same "ib_send_bw $ip GID auto-selection" "$W/ib_send_bw-$ip-ref.calls" "$W/ib_send_bw-$ip-pre.calls" preload
	bound ib_send_bw-$ip-server-pre ib_send_bw _ibv_query_gid_ex IBVERBS_1.11
	bound ib_send_bw-$ip-client-pre ib_send_bw _ibv_query_gid_ex IBVERBS_1.11
done

lap "perftest GID auto-selection (4 pairs)"
echo "compat: done in $(($(date +%s) - T0)) s"
finish
