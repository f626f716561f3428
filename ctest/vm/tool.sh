#!/usr/bin/env bash
# The rsverbs command (build/rsverbs, docs/tool.md), in the guest:
#  1. `rsverbs gids` lists, on every device and port, exactly the non-empty
#     entries that sysfs (ports/N/gids/I, gid_attrs/types/I, gid_attrs/ndevs/I)
#     and `ibv_devinfo -v` show, with every empty index inside a hole range,
#     after extra IPv4/IPv6 addresses on dummy0 and a deleted one (a hole);
#     the same rows through the sysfs fallback (ioctl refused with ENOTTY and
#     with EPROTONOSUPPORT by ctest/vm/noioctl), which the summary names; the
#     rdma_cm and perftest marks sit where their rules put them.
#  2. `rsverbs doctor`: every verdict reached by injecting its fault on
#     rxe1/dummy0, and its healthy twin: exit status, the check's status in
#     the text and in --json (parsed by python3), the fix printed; the
#     JSON's link_layer and skipped.
#  3. The conventions (docs/tool.md "Conventions"): help
#     of the command and at the top on stdout with exit 0; every form of
#     --dev/--port (--dev=X, -dX, -d X, -i N) in both commands gives what
#     the long form gives; bad usage (bad GROUP, unknown option) exit 2
#     with a three-line hint; runtime failures (unknown device or port, no
#     RDMA device at all: /dev/infiniband hidden by a tmpfs in a mount
#     namespace) exit 1 in one line on stderr, no usage, nothing on stdout.
# InfiniBand ports (doctor's skip) are not here: no InfiniBand in the test
# bed; src/tool/doctor.rs's unit tests build such ports by hand.
# dummy0's addresses, flags and rp_filter are restored on exit.
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
T=${RSVERBS_TOOL:-$(dirname "$RSVERBS_LIB")/rsverbs}
DEV=rxe1 ND=dummy0 G=239.1.1.1 G6=ff0e::1:6
SYS=/sys/class/infiniband
W=$(mktemp -d)
RP_ALL=$(cat /proc/sys/net/ipv4/conf/all/rp_filter)
RP_DEV=$(cat /proc/sys/net/ipv4/conf/$ND/rp_filter)
MC_FLAG=$(( $(cat /sys/class/net/$ND/flags) & 0x1000 ))
ADDRS_BEFORE=$(ip -o addr show dev $ND | awk '{print $3, $4}' | sort)
FLAGS_BEFORE=$(cat /sys/class/net/$ND/flags)

addrs() { ip -o addr show dev $ND | awk '{print $3, $4}' | sort; }
restore() {
	ip link set $ND up
	ip addr del $G/32 dev $ND 2>/dev/null
	ip -6 addr del $G6/128 dev $ND 2>/dev/null
	ip addr del 198.51.100.7/24 dev $ND 2>/dev/null
	ip addr del 203.0.113.9/24 dev $ND 2>/dev/null
	ip -6 addr del 2001:db8::2/64 dev $ND 2>/dev/null
	ip addr replace 192.0.2.1/24 dev $ND
	ip -6 addr replace 2001:db8::1/64 dev $ND nodad
	if [ "$MC_FLAG" = 0 ]; then ip link set $ND multicast off; else ip link set $ND multicast on; fi
	sysctl -qw net.ipv4.conf.all.rp_filter="$RP_ALL" net.ipv4.conf.$ND.rp_filter="$RP_DEV"
}
cleanup() {
	restore
	rm -rf "$RESULTS_DIR/tool" && mkdir -p "$RESULTS_DIR/tool" && cp -r "$W"/. "$RESULTS_DIR/tool/"
	rm -rf "$W"
}

if ! "$T" --version >/dev/null 2>&1; then
	if [ "${RSVERBS_USERLAND:-bookworm}" = bookworm ]; then
		fail "$T runs (make tool): $("$T" --version 2>&1 | head -1)"
	else
		echo "skip tool: $T is built against the host's glibc and does not run in the ${RSVERBS_USERLAND} userland"
	fi
	finish
	exit
fi
trap cleanup EXIT

# ---- 1. gids -----------------------------------------------------------------

# has_gid DEV GID: sysfs lists GID on DEV port 1.
has_gid() { grep -qx "$2" $SYS/$1/ports/1/gids/* 2>/dev/null; }
v4gid() { local IFS=.; set -- $1; printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$1" "$2" "$3" "$4"; }

ip addr add 198.51.100.7/24 dev $ND
ip addr add 203.0.113.9/24 dev $ND
ip -6 addr add 2001:db8::2/64 dev $ND nodad
wait_until 20 has_gid $DEV "$(v4gid 203.0.113.9)"
ip addr del 198.51.100.7/24 dev $ND
check "setup: dummy0's GIDs follow its addresses (203.0.113.9 in, 198.51.100.7 out: a hole)" \
	wait_until 20 eval "! has_gid $DEV $(v4gid 198.51.100.7) && has_gid $DEV 2001:0db8:0000:0000:0000:0000:0000:0002"

# sysfs_rows: "DEV PORT INDEX GID TYPE NETDEV" per non-empty entry and
# "DEV PORT INDEX empty" per empty one, every port of every device.
sysfs_rows() {
	local d p i g t n ll
	for d in "$SYS"/*; do
		d=${d##*/}
		for p in "$SYS/$d"/ports/*; do
			p=${p##*/}
			read -r ll < $SYS/$d/ports/$p/link_layer
			for ((i = 0; ; i++)); do
				[ -e $SYS/$d/ports/$p/gids/$i ] || break
				read -r g < $SYS/$d/ports/$p/gids/$i
				if [ "$g" = 0000:0000:0000:0000:0000:0000:0000:0000 ]; then
					echo "$d $p $i empty"
					continue
				fi
				t=$(cat $SYS/$d/ports/$p/gid_attrs/types/$i 2>/dev/null)
				case $t in "RoCE v2") t=RoCEv2 ;; "IB/RoCE v1") [ "$ll" = Ethernet ] && t=RoCEv1 || t=IB ;; esac
				n=$(cat $SYS/$d/ports/$p/gid_attrs/ndevs/$i 2>/dev/null)
				echo "$d $p $i $g $t ${n:--}"
			done
		done
	done
}
# tool_rows FILE: the same from `rsverbs gids` output, hole ranges expanded.
tool_rows() {
	awk '$1 == "DEVICE" || /^#/ { next }
	     $4 == "empty" { n = split($3, r, /\.\./); a = r[1]; b = (n == 2) ? r[2] : r[1];
	                     for (i = a; i <= b; i++) print $1, $2, i, "empty"; next }
	     { print $1, $2, $3, $4, $6, $7 }' "$1"
}

t0=$(date +%s%N)
"$T" gids > $W/gids.txt 2> $W/gids.err
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
check "gids: exit 0, nothing on stderr ($ms ms for every table)" [ $rc = 0 -a ! -s $W/gids.err ]
echo "tool: gids run after $SECONDS s"
SORT=(sort -k1,1 -k2,2n -k3,3n)
sysfs_rows | "${SORT[@]}" > $W/sysfs.rows
tool_rows $W/gids.txt | "${SORT[@]}" > $W/gids.rows
echo "tool: sysfs read after $SECONDS s"
check "gids: sysfs rows of every device ($(grep -vc empty $W/sysfs.rows) entries, $(grep -c empty $W/sysfs.rows) empty)" test -s $W/sysfs.rows
check "gids = sysfs: every non-empty entry (GID, type, netdev) and every empty index, on every device and port" \
	diff -u $W/sysfs.rows $W/gids.rows
check "gids: the deleted address left a hole on $DEV between entries" \
	awk -v d=$DEV '$1 == d && $4 == "empty" { h = 1 } $1 == d && h && $4 != "empty" { found = 1 } END { exit !found }' $W/gids.txt
check "gids: one row per non-empty entry, never one per empty slot ($(wc -l < $W/gids.txt) lines)" \
	[ "$(grep -c ' empty$' $W/gids.txt)" -lt 20 ]
check "gids: each port's summary says it read the table in one QUERY_GID_TABLE ioctl" \
	sh -c "[ \$(grep -c '^# .*read by ioctl QUERY_GID_TABLE' $W/gids.txt) = \$(ls -d $SYS/*/ports/* | wc -l) ]"

# A netdev whose name holds an ESC (the kernel's dev_valid_name refuses only
# '/', ':' and white space), with an address, so that rxe gives it a GID:
# its row shows '?' for the ESC, and no control character reaches the
# terminal (src/tool/table.rs printable).
EVIL=$'v\e[7m'
if ip link add link $ND name "$EVIL" type vlan id 77 && ip link set "$EVIL" up &&
	ip addr add 192.0.2.77/24 dev "$EVIL" && wait_until 20 has_gid $DEV "$(v4gid 192.0.2.77)"; then
	"$T" gids > $W/gids.evil 2>&1
	check "gids: the GID of a netdev named 'v ESC [7m' names it 'v?[7m'" grep -q ' v?\[7m ' $W/gids.evil
	check "gids: no control character in its output" sh -c "! LC_ALL=C grep -q '[[:cntrl:]]' $W/gids.evil"
else
	fail "setup: a VLAN named with an ESC on $ND, with a GID"
fi
ip link del "$EVIL" 2>/dev/null

# ibv_devinfo -v (rdma-core's own query): "DEV PORT INDEX GID", the GID in
# sysfs' full form, or ::ffff:a.b.c.d as ibv_devinfo prints IPv4-mapped ones.
ibv_devinfo -v > $W/devinfo.txt 2>&1
awk 'function pad(h) { return substr("0000" h, length(h) + 1) }
     function full(s,   i, l, r, a, b, out, at) {
       if (s ~ /^::ffff:[0-9.]+$/) return s
       at = index(s, "::")
       if (at) { l = (at > 1) ? split(substr(s, 1, at - 1), a, ":") : 0; r = split(substr(s, at + 2), b, ":") }
       else { l = split(s, a, ":"); r = 0 }
       out = ""
       for (i = 1; i <= l; i++) out = out pad(a[i]) ":"
       for (i = 0; i < 8 - l - r; i++) out = out "0000:"
       for (i = 1; i <= r; i++) out = out pad(b[i]) ":"
       return substr(out, 1, length(out) - 1)
     }
     /^hca_id:/ { d = $2 } /^[ \t]*port:/ { p = $2 }
     /GID\[ *[0-9]+\]:/ { s = $0; sub(/.*GID\[ */, "", s); i = s; sub(/\].*/, "", i)
                          sub(/^[^:]*\]:[ \t]*/, "", s); sub(/,.*/, "", s); print d, p, i, full(s) }' $W/devinfo.txt | sort > $W/devinfo.rows
awk '$1 == "DEVICE" || /^#/ || $4 == "empty" { next }
     { g = ($5 == "-") ? $4 : "::ffff:" $5; print $1, $2, $3, g }' $W/gids.txt | sort > $W/gids.devinfo.rows
check "gids = ibv_devinfo -v: the same GIDs at the same indexes ($(wc -l < $W/devinfo.rows) entries)" \
	sh -c "[ -s $W/devinfo.rows ] && diff -u $W/devinfo.rows $W/gids.devinfo.rows"

for e in ENOTTY EPROTONOSUPPORT; do
	"$BIN/noioctl" $e "$T" gids > $W/gids.$e.txt 2> $W/gids.$e.err
	check "gids, ioctl refused with $e: exit 0, the same rows through the sysfs fallback" \
		diff -u <(grep -v '^#' $W/gids.txt) <(grep -v '^#' $W/gids.$e.txt)
	check "gids, ioctl refused with $e: each port's summary says sysfs (fallback)" \
		sh -c "[ \$(grep -c '^# .*read by sysfs (fallback)' $W/gids.$e.txt) = \$(ls -d $SYS/*/ports/* | wc -l) ]"
done

"$T" gids $DEV:1 > $W/gids.rxe1.txt
check "gids $DEV:1: only $DEV's rows, the same as in the full listing" \
	diff -u <(grep "^$DEV " $W/gids.txt) <(grep "^$DEV " $W/gids.rxe1.txt)

# The marks. perftest (get_best_gid_index): on rxe's v1/v2 pairs, the first
# IPv4-mapped RoCE v2 entry. rdma_cm: every RoCE v2 entry (rxe has no two
# with the same GID and netdev).
for d in rxe0 rxe1; do
	want=$(awk -v d=$d '$1 == d && $6 == "RoCEv2" && $5 != "-" { print $3; exit }' $W/gids.txt)
	got=$(awk -v d=$d '$1 == d && $NF ~ /perftest/ { print $3 }' $W/gids.txt | xargs)
	check "gids: $d's perftest mark is its first IPv4-mapped RoCE v2 entry ($want)" [ -n "$want" -a "$got" = "$want" ]
	want=$(awk -v d=$d '$1 == d && $6 == "RoCEv2" { print $3 }' $W/gids.txt | xargs)
	got=$(awk -v d=$d '$1 == d && $NF ~ /rdma_cm/ { print $3 }' $W/gids.txt | xargs)
	check "gids: $d's rdma_cm marks are its RoCE v2 entries ($want)" [ -n "$want" -a "$got" = "$want" ]
done

# The real perftest agrees: ib_send_bw without -x reports the index it chose.
if command -v ib_send_bw >/dev/null; then
	port=18615
	timeout -k 5 60 ib_send_bw -d $DEV -n 5 -F -p $port > $W/ib_send_bw.server 2>&1 &
	spid=$!
	if wait_until 30 tcp_listening $port; then
		timeout -k 5 60 ib_send_bw -d $DEV -n 5 -F -p $port 192.0.2.1 > $W/ib_send_bw.client 2>&1
	fi
	wait $spid
	want=$(awk -v d=$DEV '$1 == d && $NF ~ /perftest/ { print $3 }' $W/gids.txt)
	for side in server client; do
		got=$(sed -n 's/^ *GID index *: *\([0-9]*\).*/\1/p' $W/ib_send_bw.$side)
		check "gids: ib_send_bw $side on $DEV (no -x) chose GID index ${got:-none}, the perftest mark ($want)" [ -n "$got" -a "$got" = "$want" ]
	done
fi
echo "tool: gids checked after $SECONDS s"
# ---- 2. doctor -----------------------------------------------------------------

# The --json outputs are parsed once, at the end, by one python3 (a start
# costs about a second under TCG): the checks below record what each must
# hold in $W/json.expect.
: > $W/json.expect
# doc NAME EXPECTED_RC GROUP [ARGS]: runs doctor as text and as --json into
# $W/doctor.NAME.{txt,json}; checks both exit statuses.
doc() {
	local name=$1 want=$2 rc jrc
	shift 2
	"$T" doctor "$@" > $W/doctor.$name.txt 2>&1
	rc=$?
	"$T" doctor "$@" --json > $W/doctor.$name.json 2> $W/doctor.$name.json.err
	jrc=$?
	check "doctor $name ($*): exit $want, --json too (got $rc, $jrc)" [ $rc = "$want" -a $jrc = "$want" ]
}
# verdict NAME CHECK STATUS: the check's status in the text now, in the
# JSON at the end (ok|warn|FAIL; the JSON has it in lower case).
verdict() {
	check "doctor $1: $2 is $3 in the text" grep -Eq "^  $3 +$2 " $W/doctor.$1.txt
	echo "$1 $2 ${3,,}" >> $W/json.expect
}
ready() { # ready NAME yes|no
	check "doctor $1: text says ready: $2" grep -qx "ready: $2" $W/doctor.$1.txt
	echo "$1 ready $2" >> $W/json.expect
}
# json_checks: every doctor.*.json parses as one JSON object, and holds what
# verdict and ready recorded ("NAME CHECK status" for the first port).
json_checks() {
	local name c want got
	if ! command -v python3 >/dev/null; then
		echo "skip tool: no python3 in this userland to parse --json ($(wc -l < $W/json.expect) expectations)"
		return
	fi
	python3 - $W/doctor.*.json > $W/json.got 2>&1 <<-'PY'
		import json, os, sys
		for f in sys.argv[1:]:
		    name = os.path.basename(f)[len("doctor."):-len(".json")]
		    try:
		        d = json.load(open(f))
		    except ValueError as e:
		        print(name, "invalid", str(e).replace(" ", "_"))
		        continue
		    print(name, "ready", "yes" if d["ready"] else "no")
		    for c in d["ports"][0]["checks"] if d["ports"] else []:
		        print(name, c["name"], c["status"])
	PY
	check "doctor --json: all $(ls $W/doctor.*.json | wc -l) outputs parse as JSON" sh -c "! grep -q ' invalid ' $W/json.got && [ \$(wc -l < $W/json.got) -gt 0 ]"
	while read -r name c want; do
		got=$(awk -v n="$name" -v c="$c" '$1 == n && $2 == c { print $3 }' $W/json.got)
		check "doctor $name: --json has $c = $want (${got:-missing})" [ "$got" = "$want" ]
	done < $W/json.expect
}
fix() { # fix NAME TEXT: the text output names the fix
	check "doctor $1: prints the fix '$2'" grep -qF "fix: $2" $W/doctor.$1.txt
}
wait_port() { # wait_port STATE
	wait_until 30 grep -q "$1" $SYS/$DEV/ports/1/state
}

ip link set $ND multicast on
sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.$ND.rp_filter=0
ip addr add $G/32 dev $ND autojoin
A=(--dev "$DEV" --port 1)

doc healthy 0 $G "${A[@]}"
for c in port gid mgid membership filter rp_filter limits; do verdict healthy $c ok; done
ready healthy yes
check "doctor healthy: names rdma_cm's MGID ::ffff:$G and perftest's -M bytes" \
	grep -q "rdma_cm attaches ::ffff:$G (RoCE v2); perftest: --mcg -M 0:0:0:0:0:0:0:0:0:0:255:255:239:1:1:1" $W/doctor.healthy.txt
# qkey: the port's qkey_viol_cntr (ok at 0, warn above), and its rise when
# a UD receiver on rxe1 refuses 8 datagrams sent with another Q_Key
# (ctest/vm/trace.c qkey, rdma-core alone; rxe_recv.c check_keys).
qv() { sed -n 's/.* qkey *qkey_viol_cntr \([0-9]*\).*/\1/p' $W/doctor.$1.txt | head -1; }
q0=$(qv healthy)
check "doctor healthy: reports rxe1's qkey_viol_cntr (${q0:-none}), rxe counts them (BAD_QKEY_CNTR)" [ -n "$q0" ]
if [ "${q0:-x}" = 0 ]; then verdict healthy qkey ok; else verdict healthy qkey warn; fi
"$BIN/trace" qkey $DEV 239.7.7.6 8 0x01234567 > $W/qkey-bump.out 2>&1
check "trace qkey $DEV (rdma-core): the receiver refused 8 datagrams" grep -q 'counter-rose-by-8=yes$' $W/qkey-bump.out
doc qkey-rose 0 $G "${A[@]}"
q1=$(qv qkey-rose)
verdict qkey-rose qkey warn
check "doctor qkey-rose: qkey_viol_cntr rose by >= 8 (${q0:-?} -> ${q1:-?})" [ "${q1:-0}" -ge $(( ${q0:-0} + 8 )) ]
check "doctor qkey-rose: --json has \"qkey_viol_cntr\":${q1:-?}" grep -q "\"qkey_viol_cntr\":${q1:-x}," $W/doctor.qkey-rose.json
fix qkey-rose "RSVERBS_TRACE=hints PROGRAM: hint[qkey-violations]"
doc mgid-v2 0 ::ffff:$G "${A[@]}"
verdict mgid-v2 mgid ok
doc mgid-v1 0 ff0e::ffff:$G "${A[@]}"
verdict mgid-v1 mgid warn

# Port down, and up again.
ip link set $ND down
wait_port DOWN
doc port-down 1 $G "${A[@]}"
verdict port-down port FAIL
fix port-down "ip link set $ND up"
ready port-down no
ip link set $ND up
wait_port ACTIVE
check "setup: $DEV's IPv4 GID back after the link came up" wait_until 20 has_gid $DEV "$(v4gid 192.0.2.1)"
doc port-up 0 $G "${A[@]}"
verdict port-up port ok

# No IPv4 GID on the netdev.
ip -4 addr flush dev $ND
check "setup: no IPv4-mapped GID left on $DEV" wait_until 20 eval "! grep -q ffff $SYS/$DEV/ports/1/gids/*"
doc no-gid 1 $G "${A[@]}"
verdict no-gid gid FAIL
fix no-gid "ip addr add ADDRESS/PREFIX dev $ND"
ip addr add 192.0.2.1/24 dev $ND
ip addr add 203.0.113.9/24 dev $ND
wait_until 20 has_gid $DEV "$(v4gid 192.0.2.1)"
ip addr add $G/32 dev $ND autojoin
doc gid-back 0 $G "${A[@]}"
verdict gid-back gid ok

# No IP-level membership.
ip addr del $G/32 dev $ND
doc no-member 1 $G "${A[@]}"
verdict no-member membership FAIL
fix no-member "ip addr add $G/32 dev $ND autojoin"
ip addr add $G/32 dev $ND autojoin
doc member 0 $G "${A[@]}"
verdict member membership ok

# IPv6: the same pair.
doc v6-no-member 1 $G6 "${A[@]}"
verdict v6-no-member membership FAIL
fix v6-no-member "ip addr add $G6/128 dev $ND autojoin"
verdict v6-no-member rp_filter ok
ip -6 addr add $G6/128 dev $ND autojoin
doc v6-member 0 $G6 "${A[@]}"
verdict v6-member membership ok
verdict v6-member gid ok

# The netdev's multicast filter.
ip link set $ND multicast off
doc mc-off 1 $G "${A[@]}"
verdict mc-off filter FAIL
fix mc-off "ip link set $ND multicast on"
ip link set $ND multicast on
doc mc-on 0 $G "${A[@]}"
verdict mc-on filter ok

# rp_filter strict, on the device and through all (the larger applies).
sysctl -qw net.ipv4.conf.$ND.rp_filter=1
doc rp-dev 1 $G "${A[@]}"
verdict rp-dev rp_filter FAIL
fix rp-dev "sysctl -w net.ipv4.conf.$ND.rp_filter=2"
sysctl -qw net.ipv4.conf.$ND.rp_filter=0 net.ipv4.conf.all.rp_filter=1
doc rp-all 1 $G "${A[@]}"
verdict rp-all rp_filter FAIL
fix rp-all "sysctl -w net.ipv4.conf.all.rp_filter=2"
sysctl -qw net.ipv4.conf.$ND.rp_filter=2
doc rp-loose 0 $G "${A[@]}"
verdict rp-loose rp_filter ok
sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.$ND.rp_filter=0

json_checks
echo "tool: doctor verdicts after $SECONDS s"
# Without --dev: every port is checked, ready when one is.
doc all-ports 0 $G
check "doctor all-ports: checks rxe0 and rxe1" sh -c "grep -q '^rxe0 port 1' $W/doctor.all-ports.txt && grep -q '^rxe1 port 1' $W/doctor.all-ports.txt"
check "doctor --json: a RoCE port has link_layer Ethernet and skipped 0, no check says skip" \
	sh -c "grep -q '\"link_layer\":\"Ethernet\",' $W/doctor.healthy.json && grep -q '\"skipped\":0,' $W/doctor.healthy.json && ! grep -q '\"status\":\"skip\"' $W/doctor.healthy.json"

# ---- 3. conventions ------------------------------------------------------------

# Help: stdout, exit 0, nothing on stderr.
helps() { # helps NAME WANT ARGS...: exit 0, stdout's first line matches WANT
	local name=$1 want=$2 rc
	shift 2
	"$T" "$@" > $W/help.$name.out 2> $W/help.$name.err
	rc=$?
	check "help $name ($*): exit 0, on stdout, nothing on stderr (got $rc)" \
		sh -c '[ "$1" = 0 ] && [ ! -s "$2" ] && grep -q "$3" "$4"' _ $rc $W/help.$name.err "$want" $W/help.$name.out
}
helps top '^usage: rsverbs gids' --help
helps top-h '^usage: rsverbs gids' -h
helps help '^usage: rsverbs gids' help
helps gids '^usage: rsverbs gids ' gids --help
helps gids-h '^usage: rsverbs gids ' gids -h
helps help-gids '^usage: rsverbs gids ' help gids
helps doctor '^usage: rsverbs doctor ' doctor --help
helps doctor-h '^usage: rsverbs doctor ' doctor $G -h
helps help-doctor '^usage: rsverbs doctor ' help doctor
helps version '^rsverbs [0-9]' --version
check "rsverbs --help: one line on what each command does" \
	sh -c "grep -q '^  gids  ' $W/help.top.out && grep -q '^  doctor  ' $W/help.top.out"
check "rsverbs help doctor: the same as doctor --help" cmp -s $W/help.help-doctor.out $W/help.doctor.out

# Every form of device and port gives the rows (gids) and the verdicts
# (doctor) of the long form.
"$T" gids "$DEV:1" > $W/forms.gids.ref 2>&1
for f in "--dev=$DEV --port=1" "--dev $DEV --port 1" "-d$DEV -p1" "-d $DEV -p 1" "-d $DEV -i 1" "$DEV -p1" "--port=1 $DEV"; do
	# shellcheck disable=SC2086 # $f is the options, split on purpose
	"$T" gids $f > $W/forms.out 2>&1
	rc=$?
	check "gids $f: exit 0, the rows of gids $DEV:1 (got $rc)" sh -c '[ "$1" = 0 ] && cmp -s "$2" "$3"' _ $rc $W/forms.gids.ref $W/forms.out
done
"$T" doctor $G "${A[@]}" > $W/forms.doctor.ref 2>&1
for f in "--dev=$DEV --port=1" "-d$DEV -p1" "-d $DEV -i1" "-p 1 -d $DEV"; do
	# shellcheck disable=SC2086
	"$T" doctor $G $f > $W/forms.out 2>&1
	rc=$?
	# The qkey counter may move between two runs: compare the statuses.
	check "doctor $G $f: exit 0, the verdicts of doctor $G ${A[*]}" \
		sh -c '[ "$1" = 0 ] && [ "$(awk "{print \$1, \$2}" "$2")" = "$(awk "{print \$1, \$2}" "$3")" ]' _ $rc $W/forms.doctor.ref $W/forms.out
done

# Bad usage: exit 2, three lines on stderr (what, the usage line, where
# the help is), nothing on stdout.
bad() { # bad NAME ARGS...
	local name=$1 rc
	shift
	"$T" "$@" > $W/bad.$name.out 2> $W/bad.$name.err
	rc=$?
	check "bad usage $name ($*): exit 2, a three-line hint on stderr, nothing on stdout (got $rc)" \
		sh -c '[ "$1" = 2 ] && [ ! -s "$2" ] && [ $(wc -l < "$3") = 3 ] && sed -n 2p "$3" | grep -q "^usage: rsverbs" && tail -1 "$3" | grep -q "^Try .rsverbs.*--help. for more.$"' \
		_ $rc $W/bad.$name.out $W/bad.$name.err
}
bad unicast doctor 10.0.0.1 "${A[@]}"
bad link-local doctor fe80::1 "${A[@]}"
bad words doctor not-a-group
bad no-group doctor --dev $DEV
bad unknown-option doctor $G --frob
bad gids-unknown-option gids --frob
bad gids-bad-port gids $DEV:x
bad gids-twice gids $DEV --dev=$DEV
bad dev-without-name doctor $G --dev=
bad help-unknown help frob
bad no-command
bad non-utf8 gids "$(printf 'rxe\377')"

# Runtime failures: exit 1, one line on stderr, no usage, nothing on stdout.
runtime() { # runtime NAME WANT ARGS...: WANT is a grep -E of the line
	local name=$1 want=$2 rc
	shift 2
	"$T" "$@" > $W/rt.$name.out 2> $W/rt.$name.err
	rc=$?
	check "runtime failure $name ($*): exit 1, one line on stderr, no usage (got $rc: $(head -1 $W/rt.$name.err))" \
		sh -c '[ "$1" = 1 ] && [ ! -s "$2" ] && [ $(wc -l < "$3") = 1 ] && grep -Eq "$4" "$3"' _ $rc $W/rt.$name.out $W/rt.$name.err "$want"
}
runtime unknown-dev "^rsverbs: unknown device 'nosuch0' \(devices: .*$DEV" doctor $G --dev nosuch0
runtime json-unknown-dev "^rsverbs: unknown device 'nosuch0'" doctor $G --dev nosuch0 --json
runtime unknown-port "^rsverbs: $DEV has no port 9 \(ports 1..1\)$" doctor $G --dev $DEV --port 9
runtime gids-unknown-dev "^rsverbs: unknown device 'nosuch0'" gids nosuch0
runtime gids-unknown-dev-opt "^rsverbs: unknown device 'nosuch0'" gids -dnosuch0
runtime gids-unknown-port "^rsverbs: $DEV has no port 9 " gids $DEV:9
# No RDMA device at all: rdma-core lists a device only when its
# /dev/infiniband node stat()s; a tmpfs over /dev/infiniband, in a mount
# namespace of its own, hides every one from the command alone.
nodev="^rsverbs: no RDMA devices; is the provider's module loaded\?$"
if unshare -m true 2>/dev/null; then
	for a in "gids" "gids $DEV" "doctor $G" "doctor $G --json -d$DEV"; do
		# shellcheck disable=SC2086
		unshare -m sh -c 'mount -t tmpfs none /dev/infiniband && exec "$@"' _ "$T" $a > $W/rt.nodev.out 2> $W/rt.nodev.err
		rc=$?
		check "no RDMA device: $a exits 1, one line on stderr, nothing on stdout (got $rc: $(head -1 $W/rt.nodev.err))" \
			sh -c '[ "$1" = 1 ] && [ ! -s "$2" ] && [ $(wc -l < "$3") = 1 ] && grep -Eq "$4" "$3"' _ $rc $W/rt.nodev.out $W/rt.nodev.err "$nodev"
	done
else
	echo "skip tool no-device: unshare -m is not available in this userland"
fi

# A device that exists but cannot be opened (docs/tool.md): rsverbs(1)
# EXIT STATUS, 1 "a device could not be queried" (the parent commit exited
# 0). rdma-core lists a device whose /dev/infiniband node stat()s, then
# opens it; a preloaded open()/openat() refuses $DEV's node with EACCES.
uv=$(grep -lx $DEV /sys/class/infiniband_verbs/uverbs*/ibdev 2>/dev/null | head -1 | xargs -r dirname | xargs -r basename)
cat > $W/noopen.c <<EOC
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
static int refused(const char *p) { return p && !strcmp(p, "/dev/infiniband/$uv"); }
#define WRAP(name, ...) int name(__VA_ARGS__, int flags, ...) { \\
	va_list ap; va_start(ap, flags); int mode = va_arg(ap, int); va_end(ap); \\
	if (refused(path)) { errno = EACCES; return -1; } \\
	int (*real)() = (int (*)())dlsym(RTLD_NEXT, #name); return real(ARGS, flags, mode); }
#define ARGS path
WRAP(open, const char *path) WRAP(open64, const char *path)
#undef ARGS
#define ARGS dfd, path
WRAP(openat, int dfd, const char *path) WRAP(openat64, int dfd, const char *path)
EOC
if [ -z "$uv" ]; then
	fail "gids, $DEV not openable: no uverbs node names $DEV in /sys/class/infiniband_verbs"
elif ! cc -shared -fPIC -o $W/noopen.so $W/noopen.c -ldl 2> $W/noopen.cc.err; then
	echo "skip gids-unopenable: no C compiler for the preload ($(head -1 $W/noopen.cc.err))"
else
	LD_PRELOAD=$W/noopen.so "$T" gids $DEV > $W/unopenable.out 2> $W/unopenable.err
	rc=$?
	check "gids $DEV when /dev/infiniband/$uv cannot be opened: exit 1, ibv_open_device failed on stderr (got $rc)" \
		sh -c '[ "$1" = 1 ] && grep -q "ibv_open_device failed" "$2"' _ $rc $W/unopenable.err
fi

restore
check "restored: $ND's addresses, flags and rp_filter as the suite found them" \
	wait_until 10 eval '[ "$(addrs)" = "$ADDRS_BEFORE" ] && [ "$(cat /sys/class/net/$ND/flags)" = "$FLAGS_BEFORE" ] &&
		[ "$(cat /proc/sys/net/ipv4/conf/all/rp_filter) $(cat /proc/sys/net/ipv4/conf/$ND/rp_filter)" = "$RP_ALL $RP_DEV" ]'

finish
