#!/usr/bin/env bash
# make demo-ib: the InfiniBand half of make demo, on Debian 12, as root.
# Boots Debian's Linux 6.1 with the test bed's software InfiniBand HCA,
# sib, its emulated switch between two ports (testbed/README.md), opensm as
# the subnet manager and IPoIB, and runs ctest/vm/sibswitch.sh there; then
# tells from its results the question rsverbs answers, on InfiniBand:
#   - a receiver on sib1 that only attaches gets none of a group's
#     datagrams from sib0: the switch forwards a group only to the ports
#     the SM put in its multicast table, those of the SA's members;
#   - rsverbs doctor says so, and names the join as the fix;
#   - the same receiver with RSVERBS_MCAST_FABRICJOIN=1 (rsverbs joins at
#     the SA after the attach) gets all of them, and doctor says ready.
# Each of these is a check of the suite; the demo fails when one does.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
DEMO=demo-ib
source demo/common.bash

step 1/4 "packages: tools/deps.sh (apt-get, only what is missing)"
install_deps

step 2/4 "build librsverbs.so.1, the command and the guest's programs: make all, ctest/build.sh"
make --no-print-directory all
ctest/build.sh

step 3/4 "boot the test bed with sib (switch=1), opensm and IPoIB: ctest/vm/sibswitch.sh"
out=$(mktemp -d "${TMPDIR:-/tmp}/rsverbs-demo-ib.XXXXXX")
rc=0
RSVERBS_SIB=1 RSVERBS_SUITES=sibswitch RSVERBS_VM_OUT="$out" RSVERBS_VM_TIMEOUT=900 ctest/vm_suite.sh > "$out/console.log" 2>&1 || rc=$?
r=$out/sibswitch
passed=$(grep -c '^PASS' "$out/sibswitch.results" 2>/dev/null || true)
failed=$(grep -c '^FAIL' "$out/sibswitch.results" 2>/dev/null || true)
echo "${passed:-0} checks passed, ${failed:-0} failed"

step 4/4 "what happened"
show() { [ -s "$1" ] && sed 's/^/    /' "$1" || echo "    (not run: $1 is missing)"; }
got() { sed -n 's/^done \([0-9]*\)$/\1/p' "$1" 2>/dev/null | tail -1; }
echo "  the fabric (ibnetdiscover from sib0): $(grep -c '^Switch' "$r/ibnetdiscover" 2>/dev/null || echo 0) switch," \
	"$(grep -c '^Ca' "$r/ibnetdiscover" 2>/dev/null || echo 0) CAs; opensm programs the switch's tables"
echo
echo "  1. a receiver on sib1 that only attaches (ibv_attach_mcast, no join at the SA):" \
	"$(got "$r/recv.attach") of mckey's 5 datagrams arrived; the switch dropped them"
echo "     rsverbs doctor said, before any join on sib1:"
show "$r/doctor.before"
echo
echo "  2. the same receiver with RSVERBS_MCAST_FABRICJOIN=1 and librsverbs.so.1 preloaded:" \
	"$(got "$r/recv.join") of 5 arrived"
grep -h 'fabricjoin joined' "$r/recv.join" 2>/dev/null | cut -c1-200 | sed 's/^/    /' || true
echo "     rsverbs doctor said, while it was joined:"
show "$r/doctor.joined"
echo
echo "demo-ib: done in $((SECONDS - start)) s"
if [ "$rc" -ne 0 ] || [ "${failed:-0}" != 0 ] || [ "${passed:-0}" = 0 ]; then
	echo "demo-ib: FAILED (status $rc, $failed checks failed); the guest's log is $out/serial.log, its files $r" >&2
	grep '^FAIL' "$out/sibswitch.results" >&2 2>/dev/null || true
	exit 1
fi
rm -rf "$out"
