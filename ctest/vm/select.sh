#!/usr/bin/env bash
# GID selection (rsverbs_gid_index(3), docs/gid-select.md), in the guest, on
# rxe1/dummy0, against what rdma_cm and perftest choose themselves:
#  - tables: as booted; with two more IPv4 addresses, one deleted again (a
#    hole), and one more IPv6 address; with a VLAN netdev dummy0.7 on dummy0
#    (a second netdev with its own GIDs); with one address on both netdevs;
#  - rdma_cm: for each address, the GID entry that rdma_cm binds (its GID,
#    type and netdev; for IPv4 also its own multicast join's sgid_index:
#    ctest/vm/select.c) is rsverbs_gid_index_rdma_cm's answer;
#  - perftest: ib_send_bw without -x reports its GID index, on both sides,
#    equal to rsverbs_gid_index_perftest's;
#  - find: each filter's answer equals the first matching row of sysfs
#    (ports/1/gids, gid_attrs/types, gid_attrs/ndevs) and
#    /proc/net/vlan/config;
#  - the same answers with the ioctl refused (ENOTTY: rdma-core's sysfs walk);
#  - the documented errors, and errno kept on success.
# dummy0's addresses and the VLAN netdev are restored on exit.
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
# The plain build, preloaded: select.c finds the functions with dlsym (a
# relinked build that calls none of them directly would not keep -lrsverbs).
S=(env LD_PRELOAD=$RSVERBS_LIB $BIN/select)
DEV=rxe1 ND=dummy0 VL=dummy0.7 G4=239.1.5.1 G6=ff0e::1:5
P=/sys/class/infiniband/$DEV/ports/1
W=$(mktemp -d)
restore() {
	ip link del $VL 2>/dev/null
	ip addr del 198.51.100.7/24 dev $ND 2>/dev/null
	ip addr del 203.0.113.9/24 dev $ND 2>/dev/null
	ip -6 addr del 2001:db8::2/64 dev $ND 2>/dev/null
	rm -rf "$RESULTS_DIR/select" && mkdir -p "$RESULTS_DIR/select" && cp -r "$W"/. "$RESULTS_DIR/select/"
	rm -rf "$W"
}
trap restore EXIT

has_gid() { grep -qx "$1" $P/gids/* 2>/dev/null; }
v4gid() { local IFS=.; set -- $1; printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$1" "$2" "$3" "$4"; }

# rows: "INDEX GID TYPE NETDEV VLAN" per non-empty entry of rxe1 port 1;
# TYPE 1 (RoCE v1) or 2 (RoCE v2), VLAN 65535 for a netdev that is not one.
rows() {
	local i g t n v
	for ((i = 0; ; i++)); do
		[ -e $P/gids/$i ] || break
		read -r g < $P/gids/$i
		[ "$g" = 0000:0000:0000:0000:0000:0000:0000:0000 ] && continue
		read -r t < $P/gid_attrs/types/$i
		case $t in "RoCE v2") t=2 ;; *) t=1 ;; esac
		read -r n < $P/gid_attrs/ndevs/$i
		v=$(awk -v n="$n" -F'|' 'NR > 2 { gsub(/ /, "", $1); gsub(/ /, "", $2); if ($1 == n) print $2 }' /proc/net/vlan/config 2>/dev/null)
		echo "$i $g $t $n ${v:-65535}"
	done
}
# want TYPE FAM NETDEV VLAN START: the first row that passes (-1 for none);
# TYPE -1, FAM 0, NETDEV 0 and VLAN -1 pass all.
want() {
	awk -v t="$1" -v f="$2" -v n="$3" -v vl="$4" -v s="$5" '
	     { v4 = ($2 ~ /^0000:0000:0000:0000:0000:ffff:/) }
	     $1 >= s && (t == -1 || $3 == t) && (f == 0 || (f == 4) == v4) && (n == "0" || $4 == n) && (vl == -1 || $5 == vl) { print $1; found = 1; exit }
	     END { if (!found) print -1 }' $W/rows
}
# finds LABEL: every filter below, rsverbs' answer against want's.
FILTERS=("-1 0 0 -1 0" "2 4 0 -1 0" "2 6 0 -1 0" "1 4 0 -1 0" "1 6 0 -1 0" "2 4 $ND -1 0" "2 4 0 65535 0" "-1 0 0 -1 3" "2 4 0 -1 FIRST")
finds() {
	local label=$1 f got exp ok=0 n=0 args diff=$W/find.${1// /-}.diff
	rows > $W/rows
	for f in "${FILTERS[@]}" ${EXTRA_FILTERS:+"${EXTRA_FILTERS[@]}"}; do
		args=${f/FIRST/$(($(want 2 4 0 -1 0) + 1))}
		exp=$(want $args)
		got=$("${S[@]}" find $DEV 1 $args | awk '{ print $2 }')
		n=$((n + 1))
		if [ "$got" = "$exp" ]; then ok=$((ok + 1)); else echo "find $args: rsverbs $got, sysfs $exp" >> $diff; fi
		if [ -n "${NOIOCTL:-}" ]; then
			got=$("$BIN/noioctl" ENOTTY "${S[@]}" find $DEV 1 $args | awk '{ print $2 }')
			n=$((n + 1))
			if [ "$got" = "$exp" ]; then ok=$((ok + 1)); else echo "find $args (ioctl refused): rsverbs $got, sysfs $exp" >> $diff; fi
		fi
	done
	check "find, $label: $ok of $n filters answer as sysfs' first matching row ($(wc -l < $W/rows) entries)" [ "$ok" = "$n" ]
}
# cm LABEL ADDR GROUP: rdma_cm's own join and rsverbs agree.
# The entry rsverbs names must hold the GID that rdma_cm bound, be of the
# type rdma_cm binds (configfs default_roce_mode, RoCE v2 as booted) and sit
# on the netdev that holds the address; where the kernel lets rdma_cm join
# (IPv4), the join's sgid_index must equal it too.
cm() {
	local out gid cm rs ifname ok=1 t n g
	out=$("${S[@]}" rdma_cm "$2" "$3" 2>&1)
	echo "$out" >> $W/rdma_cm.txt
	if [[ $out =~ \ ([^ ]+)\ gid=([0-9a-f:]+)\ cm=([0-9]+|-)\ rsverbs=([0-9]+)$ ]]; then
		ifname=${BASH_REMATCH[1]} gid=${BASH_REMATCH[2]} cm=${BASH_REMATCH[3]} rs=${BASH_REMATCH[4]}
		read -r g < $P/gids/$rs
		read -r t < $P/gid_attrs/types/$rs
		read -r n < $P/gid_attrs/ndevs/$rs
		[ "$g" = "$gid" ] && [ "$t" = "RoCE v2" ] && [ "$n" = "$ifname" ] &&
			{ [ "$cm" = - ] || [ "$cm" = "$rs" ]; } && ok=0
		out="$out; sysfs $rs: $g, $t, $n"
	fi
	check "rdma_cm, $1: $2 bound through rdma_cm: its entry is rsverbs_gid_index_rdma_cm's ($out)" [ $ok = 0 ]
}
# perf LABEL: ib_send_bw without -x on rxe1, both sides, against rsverbs.
perf_port=18630
perf() {
	local want got side
	want=$("${S[@]}" perftest $DEV 1 | awk '{ print $4 }')
	perf_port=$((perf_port + 1))
	timeout -k 5 60 ib_send_bw -d $DEV -n 5 -F -p $perf_port > $W/ib_send_bw.$1.server 2>&1 &
	local spid=$!
	if wait_until 30 tcp_listening $perf_port; then
		timeout -k 5 60 ib_send_bw -d $DEV -n 5 -F -p $perf_port 192.0.2.1 > $W/ib_send_bw.$1.client 2>&1
	fi
	wait $spid
	for side in server client; do
		got=$(sed -n 's/^ *GID index *: *\([0-9]*\).*/\1/p' $W/ib_send_bw.$1.$side)
		check "perftest, $1: ib_send_bw $side (no -x) chose GID index ${got:-none}, rsverbs_gid_index_perftest $want" [ -n "$got" -a "$got" = "$want" ]
	done
}

# ---- as booted ------------------------------------------------------------------
check "errors: every documented errno, and errno kept on success" sh -c "${S[*]} errors $DEV > $W/errors.txt 2>&1"
NOIOCTL=1 finds booted
cm booted 192.0.2.1 $G4
cm "booted, IPv6" 2001:db8::1 $G6
perf booted

# ---- holes and more addresses ---------------------------------------------------
ip addr add 198.51.100.7/24 dev $ND
ip addr add 203.0.113.9/24 dev $ND
ip -6 addr add 2001:db8::2/64 dev $ND nodad
wait_until 20 has_gid "$(v4gid 203.0.113.9)"
ip addr del 198.51.100.7/24 dev $ND
check "setup: a hole where 198.51.100.7 was, 203.0.113.9 and 2001:db8::2 in" \
	wait_until 20 eval "! has_gid $(v4gid 198.51.100.7) && has_gid 2001:0db8:0000:0000:0000:0000:0000:0002"
NOIOCTL=1 finds holes
cm holes 203.0.113.9 $G4
cm "holes, IPv6" 2001:db8::2 $G6

# ---- a VLAN netdev: a second netdev on the port -----------------------------------
if ip link add link $ND name $VL type vlan id 7 2>$W/vlan.err && ip link set $VL up; then
	ip addr add 10.7.0.1/24 dev $VL
	ip -6 addr add 2001:db8:7::1/64 dev $VL nodad
	check "setup: $VL's GIDs on $DEV (10.7.0.1, 2001:db8:7::1)" \
		wait_until 20 eval "has_gid $(v4gid 10.7.0.1) && has_gid 2001:0db8:0007:0000:0000:0000:0000:0001"
	EXTRA_FILTERS=("2 4 $VL -1 0" "-1 0 0 7 0" "2 6 0 7 0" "-1 0 0 8 0")
	NOIOCTL=1 finds vlan
	cm vlan 10.7.0.1 $G4
	cm "vlan, IPv6" 2001:db8:7::1 $G6
	perf vlan
	# One address on both netdevs: one GID per netdev, rdma_cm's rule tells them apart.
	ip addr add 192.0.2.1/32 dev $VL
	wait_until 20 eval "[ \$(grep -lx $(v4gid 192.0.2.1) $P/gids/* | wc -l) -ge 4 ]"
	rows > $W/rows
	for nd in $ND $VL; do
		exp=$(awk -v g="$(v4gid 192.0.2.1)" -v n=$nd '$2 == g && $3 == 2 && $4 == n { print $1; exit }' $W/rows)
		got=$("${S[@]}" rdma_cm_at $DEV 1 192.0.2.1 $nd | awk '{ print $2 }')
		check "rdma_cm, one address on two netdevs: on $nd, index ${got} (sysfs: the RoCE v2 entry of 192.0.2.1 on $nd, ${exp:-none})" [ -n "$exp" -a "$got" = "$exp" ]
	done
	got=$("${S[@]}" rdma_cm_at $DEV 1 192.0.2.1 0 | awk '{ print $2 }')
	exp=$(awk -v g="$(v4gid 192.0.2.1)" '$2 == g && $3 == 2 { print $1; exit }' $W/rows)
	check "rdma_cm, any netdev (ifindex 0): the lowest ($got, sysfs $exp)" [ "$got" = "$exp" ]
	ip link del $VL
	check "setup: $VL's GIDs gone" wait_until 20 eval "! has_gid $(v4gid 10.7.0.1)"
	unset EXTRA_FILTERS
	finds "VLAN gone"
else
	fail "setup: a VLAN netdev on $ND (8021q): $(cat $W/vlan.err)"
fi
finish
