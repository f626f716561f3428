#!/usr/bin/env bash
# make demo: on Debian 12, from a fresh clone. Installs what is missing,
# builds rsverbs and the example, boots the Soft-RoCE test bed (Debian's
# Linux 6.1 under qemu) and runs there, over rsverbs:
#   - ctest/vm/mcgroup.c, our multicast example, relinked with
#     `pkg-config --cflags --libs rsverbs`;
#   - mckey (rdmacm-utils), unmodified, with LD_PRELOAD=librsverbs.so.1;
#   - "I attached, and nothing arrives": a receiver that only attaches gets
#     nothing and RSVERBS_TRACE=hints says why; RSVERBS_MCAST_IPJOIN=1 makes
#     the join and everything arrives; a sender on another Q_Key is named
#     by hint[qkey-violations]; rsverbs doctor shows the host's state.
# Ends with a short summary: device, groups, datagrams sent and received,
# and which library served each verb call. The guest side is demo/guest.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
DEMO=demo
source demo/common.bash

step 1/5 "packages: tools/deps.sh (apt-get, only what is missing)"
install_deps

step 2/5 "build librsverbs.so.1: make all"
make --no-print-directory all

step 3/5 "build the example: ctest/build.sh (mcgroup: rdma-core only; mcgroup.rsv: pkg-config rsverbs)"
ctest/build.sh

step 4/5 "boot the test bed: the example, mckey, and why nothing arrives, over rsverbs"
out=$(mktemp -d "${TMPDIR:-/tmp}/rsverbs-demo.XXXXXX")
rc=0
testbed/vm.sh run --timeout 600 --out "$out" -- demo/guest.sh || rc=$?

step 5/5 summary
if [ -s "$out/summary.txt" ]; then
	cat "$out/summary.txt"
else
	echo "demo: the guest wrote no summary"
fi
echo "demo: done in $((SECONDS - start)) s"
if [ "$rc" -ne 0 ]; then
	echo "demo: FAILED (status $rc); the guest's console log is $out/serial.log" >&2
	exit "$rc"
fi
rm -rf "$out"
