#!/usr/bin/env bash
# `rsverbs selftest` (docs/selftest.md), in the guest:
#  1. On rxe0 (lo) and rxe1 (dummy0): exit 0, every case identical, in text
#     and in --json (parsed by python3), the report file the same as stdout;
#     the header's facts are the guest's (uname -r, the rdma-core release of
#     libibverbs1, node_type from sysfs).
#  2. With librsverbs.so.1 preloaded: still exit 0, rdma-core's verbs still
#     libibverbs' own (the dlvsym lookup is not fooled by the preload).
#  3. A library broken on purpose: the same command built with
#     --cfg rsverbs_selftest_broken (ctest/build.sh: $BIN/rsverbs-broken),
#     whose rsverbs side answers ibv_query_gid on port 0 with another errno,
#     exits 1 and names that case with both answers. (A preload cannot break
#     rsverbs' side: its engine is linked into the command, and rdma-core's
#     side is found by dlvsym on libibverbs' own handle.)
#  4. Nothing left behind: the device's QPs (rdma resource) and the IP
#     multicast memberships as before, after full runs and after one stopped
#     by SIGINT midway (exit 2, "interrupted"; a preload raises it in the
#     command's first ibv_create_qp).
#  5. Refusals: no RDMA device (/dev/infiniband hidden by a tmpfs in a
#     mount namespace) exit 2 with the one-line message; bad usage exit 2.
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
T=${RSVERBS_TOOL:-$(dirname "$RSVERBS_LIB")/rsverbs}
BROKEN=${BIN:-ctest/out/bin}/rsverbs-broken
W=$(mktemp -d)
trap 'rm -rf "$RESULTS_DIR/selftest" && mkdir -p "$RESULTS_DIR/selftest" && cp -r "$W"/. "$RESULTS_DIR/selftest/"; rm -rf "$W"' EXIT

if ! "$T" --version >/dev/null 2>&1; then
	if [ "${RSVERBS_USERLAND:-bookworm}" = bookworm ]; then
		fail "$T runs (make tool): $("$T" --version 2>&1 | head -1)"
	else
		echo "skip selftest: $T is built against the host's glibc and does not run in the ${RSVERBS_USERLAND} userland"
	fi
	finish
	exit
fi

qps() { rdma resource show qp 2>/dev/null | wc -l; }
QPS_BEFORE=$(qps)
ip maddr show > $W/maddr.before 2>&1

# ---- 1. every case identical on both devices ------------------------------------
start=$SECONDS
"$T" selftest > $W/all.out 2> $W/all.err
rc=$?
echo "selftest: both devices in $((SECONDS - start)) s"
check "selftest on rxe0 and rxe1: exit 0 (got $rc; $(tail -1 $W/all.out))" [ "$rc" = 0 ]
check "selftest: no case different, none skipped but the documented" \
	sh -c '! grep -q DIFFERENT "$1" && grep -q "^result: [0-9]* cases, [0-9]* identical, 0 different: every answer is rdma-core" "$1"' _ $W/all.out
for d in rxe0 rxe1; do
	check "selftest: $d port 1 (Ethernet) and its table reported, 0 different" \
		sh -c 'grep -A20 "^device $1\$" "$2" | grep -Eq "^  port 1 \(Ethernet\): [0-9]+ cases, [0-9]+ identical, 0 different" &&
			grep -A20 "^device $1\$" "$2" | grep -Eq "^  all ports \(_ibv_query_gid_table\): [0-9]+ cases, [0-9]+ identical, 0 different"' _ $d $W/all.out
	check "selftest: $d's node_type is sysfs' ($(cat /sys/class/infiniband/$d/node_type))" \
		grep -qx "  node_type  $(cat /sys/class/infiniband/$d/node_type)" <(grep -A10 "^device $d\$" $W/all.out)
done
check "selftest: the header's kernel is uname -r ($(uname -r))" grep -qx "kernel       $(uname -r)" $W/all.out
rel=$(dpkg-query -W -f='${Version}' libibverbs1 2>/dev/null | sed -E 's/^([0-9]+\.[0-9]+).*/\1/')
check "selftest: the header's rdma-core release is libibverbs1's ($rel)" grep -qx "rdma-core    $rel" $W/all.out
check "selftest: rdma-core's verbs are libibverbs.so.1's own" grep -Eq "^libibverbs   /.*/libibverbs\.so\.1" $W/all.out
check "selftest: attach and detach ran (no skip but the RC QP's, if any)" \
	sh -c '! grep "skipped:" "$1" | grep -vq "non-UD QP"' _ $W/all.out

"$T" selftest rxe1 --json --report $W/rxe1.json > $W/rxe1.json.out 2> $W/rxe1.json.err
rc=$?
check "selftest rxe1 --json --report FILE: exit 0 (got $rc)" [ "$rc" = 0 ]
check "selftest --json: one object, run > 0, different 0, exit 0, the device rxe1 only" \
	python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["different"]==0 and j["run"]>0 and j["exit"]==0, j; assert [d["name"] for d in j["devices"]]==["rxe1"]; assert j["host"]["kernel"]' $W/rxe1.json.out
check "selftest --report FILE: the file is what stdout got" cmp -s $W/rxe1.json $W/rxe1.json.out

# ---- 2. rsverbs preloaded ------------------------------------------------------
LD_PRELOAD=$RSVERBS_LIB "$T" selftest rxe0 > $W/preload.out 2> $W/preload.err
rc=$?
check "selftest with librsverbs.so.1 preloaded: exit 0 (got $rc)" [ "$rc" = 0 ]
check "selftest preloaded: rdma-core's verbs still libibverbs.so.1's own, the preload named" \
	sh -c 'grep -Eq "^libibverbs   /.*/libibverbs\.so\.1" "$1" && grep -q "^LD_PRELOAD   .*librsverbs.so.1" "$1"' _ $W/preload.out

# ---- 3. a library broken on purpose -------------------------------------------------
if [ ! -x "$BROKEN" ]; then
	fail "selftest: the broken build $BROKEN exists (ctest/build.sh)"
else
	"$BROKEN" selftest rxe0 > $W/broken.out 2> $W/broken.err
	rc=$?
	check "selftest, one errno of rsverbs broken on purpose: exit 1 (got $rc)" [ "$rc" = 1 ]
	check "selftest, broken: the case named with both answers" \
		sh -c 'grep -A2 "^    DIFFERENT ibv_query_gid port 0 (no such port) index 0\$" "$1" | grep -q "^      rdma-core: ret=" &&
			grep -A2 "^    DIFFERENT ibv_query_gid port 0 (no such port) index 0\$" "$1" | grep -q "^      rsverbs:   ret="' _ $W/broken.out
	check "selftest, broken: that case alone different" grep -q "^result: [0-9]* cases, [0-9]* identical, 1 different: DIFFERENT" $W/broken.out
fi

# ---- 4. nothing left behind -----------------------------------------------------------
check "selftest: the device's QPs as before ($QPS_BEFORE lines of rdma resource show qp)" [ "$(qps)" = "$QPS_BEFORE" ]
# SIGINT midway, at a known point: a preload that raises it in the command's
# first ibv_create_qp (the PD and CQ exist, the QP is made; a run takes
# about a second, too short to hit with kill from here).
cat > $W/sigint.c <<'EOC'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
void *ibv_create_qp(void *pd, void *attr)
{
	void *(*real)(void *, void *) = (void *(*)(void *, void *))dlsym(RTLD_NEXT, "ibv_create_qp");
	void *qp = real(pd, attr);
	static int raised;
	if (!raised++)
		raise(SIGINT);
	return qp;
}
EOC
if ! cc -shared -fPIC -o $W/sigint.so $W/sigint.c -ldl 2> $W/sigint.cc.err; then
	fail "selftest SIGINT: the preload compiles ($(head -1 $W/sigint.cc.err))"
else
	LD_PRELOAD=$W/sigint.so "$T" selftest > $W/int.out 2> $W/int.err
	rc=$?
	check "selftest stopped by SIGINT after its QP was made: exit 2, interrupted and released said (got $rc)" \
		sh -c '[ "$1" = 2 ] && grep -q "interrupted: not every case ran" "$2" && grep -q "every object made was released" "$3"' _ $rc $W/int.out $W/int.err
	check "selftest after SIGINT: the device's QPs as before" [ "$(qps)" = "$QPS_BEFORE" ]
fi
ip maddr show > $W/maddr.after 2>&1
# IP-level memberships (ip maddr's inet and inet6 lines: /proc/net/igmp and
# igmp6) as before. The link-level ones are no witness on 6.1: rxe's detach
# frees the group without removing its MAC from the netdev (docs/rust.md,
# ctest/vm/rust.sh; rdma-core's own attaches and detaches leave them too),
# so they are only counted.
check "selftest: every netdev's IP multicast memberships as before (ip maddr inet, inet6)" \
	cmp -s <(grep -v '^[[:space:]]*link ' $W/maddr.before) <(grep -v '^[[:space:]]*link ' $W/maddr.after)
echo "note selftest: link-level multicast lines before $(grep -c '^[[:space:]]*link ' $W/maddr.before), after $(grep -c '^[[:space:]]*link ' $W/maddr.after) (rxe keeps a detached group's MAC on 6.1)"

# ---- 5. refusals -------------------------------------------------------------------
if unshare -m true 2>/dev/null; then
	unshare -m sh -c 'mount -t tmpfs none /dev/infiniband && exec "$@"' _ "$T" selftest > $W/nodev.out 2> $W/nodev.err
	rc=$?
	check "selftest with no RDMA device: exit 2, the one line, nothing on stdout (got $rc)" \
		sh -c '[ "$1" = 2 ] && [ "$(cat "$2")" = "rsverbs: no RDMA devices; is the provider'"'"'s module loaded?" ] && [ ! -s "$3" ]' _ $rc $W/nodev.err $W/nodev.out
else
	echo "skip selftest no-device: unshare -m is not available in this userland"
fi
"$T" selftest --limits > $W/usage.out 2> $W/usage.err
rc=$?
check "selftest --limits (not in this release): bad usage, exit 2 (got $rc)" [ "$rc" = 2 ]
"$T" selftest nosuch0 > $W/unknown.out 2> $W/unknown.err
rc=$?
check "selftest nosuch0: exit 2 (got $rc)" [ "$rc" = 2 ]

finish
