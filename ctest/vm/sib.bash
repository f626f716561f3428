# Shared by the suites of sib, the test bed's software InfiniBand HCA
# (ctest/vm/sib.sh, ctest/vm/sibfaults.sh, ctest/vm/sibswitch.sh), sourced after ctest/lib.sh;
# $W is the suite's scratch directory.
S=/sys/class/infiniband
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# The module as the test bed left it for the guest.
KO=/run/rsverbs/job/sib.ko
# The rsverbs command, beside the library (as ctest/vm/tool.sh finds it).
T=${RSVERBS_TOOL:-$(dirname "${RSVERBS_LIB:-/nonexistent/x}")/rsverbs}
# show LABEL FILE: FILE's lines in the log, each after "  LABEL: ".
show() { sed "s/^/  $1: /" "$2"; }
# opensm on sib0's port (osm_start LOG sets osm_pid), and its stop.
osm_pid=
OSM_GUID=0x0200005349420001
osm_start() { # LOG: opensm on sib0's port, in the background; its cache
  # (OSM_CACHE_DIR) and its dumps in $W: the guest sees the root read-only.
  mkdir -p "$W/osm-cache" "$W/osm-dumps"
  OSM_CACHE_DIR=$W/osm-cache opensm -g $OSM_GUID -f "$1" --dump_files_dir "$W/osm-dumps" > "$1.out" 2>&1 &
  osm_pid=$!
}
osm_stop() { [ -z "$osm_pid" ] || { kill "$osm_pid" 2>/dev/null; wait "$osm_pid" 2>/dev/null; osm_pid=; }; }
both_active() { [ "$(cat $S/sib0/ports/1/state $S/sib1/ports/1/state 2>/dev/null | tr '\n' ' ')" = "4: ACTIVE 4: ACTIVE " ]; }
# sib_unload WHAT SINCE NAME: rmmod sib (the check "rmmod sib WHAT"), then
# the kernel log after its line SINCE (dmesg | wc -l at the load) in
# $W/NAME, which must hold no WARNING, BUG or Call Trace.
sib_unload() {
  if rmmod sib 2> "$W/rmmod.err"; then pass "rmmod sib $1"; else fail "rmmod sib $1: $(cat "$W/rmmod.err")"; fi
  dmesg | tail -n +"$(($2 + 1))" > "$W/$3"
  show dmesg "$W/$3"
  check "no WARNING, BUG or Call Trace in the kernel log since the load ($1)" \
    bash -c "! grep -Eq 'WARNING|BUG|Call Trace|refcount|leak' '$W/$3'"
}
# keep_group GROUP: a librdmacm member on sib0 (ib0, 10.77.0.1) holds GROUP
# in the coprocess KEEP (ctest/vm/member.c hold) until keep_release;
# kept=1 once it said "held" (30 s at most).
keep_group() {
  local l
  coproc KEEP { exec "$BIN/member" sib0 ib0 10.77.0.1 hold full rdmacm "$1" 2>&1; }
  # (bash unsets KEEP_PID when the coprocess ends: kept here for the wait.)
  keep_pid=$KEEP_PID kept=0
  while read -r -t 30 l <&"${KEEP[0]}"; do [ "$l" = held ] && { kept=1; break; }; done
}
keep_release() { echo >&"${KEEP[1]}" 2>/dev/null; wait "$keep_pid" 2>/dev/null; }
# sa_mlid MGID: the MLID of the SA's MCMemberRecord of MGID (SM_Key 1,
# opensm's default: trusted), hex in lower case without 0x; empty without
# one. saquery's answer is kept in $W/sa.keep.
sa_mlid() {
  saquery --smkey 1 -C sib0 -m > "$W/sa.keep" 2>&1
  grep -A1 "MGID\.*$1\$" "$W/sa.keep" | sed -n 's/.*Mlid\.*0x\([0-9A-Fa-f]*\)$/\1/p' | head -1 | tr 'A-F' 'a-f'
}
# ipoib_up: IPoIB on both ports, ib0 (sib0) 10.77.0.1 here, ib1 (sib1)
# 10.77.0.2 in the network namespace $NS (the suite's), where rdma_cm binds
# each port's own address.
ipoib_up() {
  /run/rsverbs/modprobe ib_ipoib && wait_until 10 test -e /sys/class/net/ib1 &&
    ip netns add $NS && ip link set ib1 netns $NS &&
    ip addr add 10.77.0.1/24 dev ib0 && ip link set ib0 up &&
    ip netns exec $NS ip addr add 10.77.0.2/24 dev ib1 && ip netns exec $NS ip link set ib1 up &&
    ip netns exec $NS ip link set lo up
}
# members_of MGID: how many MCMemberRecords the SA holds for it (SM_Key 1,
# opensm's default: trusted); records_are MGID N.
members_of() { saquery --smkey 1 -C sib0 -m 2>/dev/null | grep -c "MGID\.*$1\$"; }
records_are() { [ "$(members_of "$1")" = "$2" ]; }
# ipoib_of DEV: the IPoIB netdev of DEV's port 1 in this namespace, found
# as IPoIB builds it (ipoib_main.c ipoib_intf_init: type 32, a 20-byte
# hardware address whose bytes 4 to 19 are the port's GID 0); empty if none.
ipoib_of() {
  local gid n a
  gid=$(tr -d ':' < "$S/$1/ports/1/gids/0" 2>/dev/null) || return 0
  for n in /sys/class/net/*; do
    [ "$(cat "$n/type" 2>/dev/null)" = 32 ] || continue
    a=$(tr -d ':' < "$n/address")
    [ "${a:8}" = "$gid" ] && { basename "$n"; return 0; }
  done
}
