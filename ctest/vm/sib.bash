# Shared by the suites of sib, the test bed's software InfiniBand HCA
# (ctest/vm/sib.sh, ctest/vm/sibswitch.sh), sourced after ctest/lib.sh;
# $W is the suite's scratch directory.
S=/sys/class/infiniband
# show LABEL FILE: FILE's lines in the log, each after "  LABEL: ".
show() { sed "s/^/  $1: /" "$2"; }
# opensm on sib0's port (osm_start sets osm_pid), and its stop.
osm_pid=
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
