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
#     The run's own file descriptors as before it (the report's fds line),
#     and a preload that leaves one open (an fd of /dev/null opened in
#     ibv_create_cq) makes it exit 1 and name it.
#  5. Refusals: no RDMA device (/dev/infiniband hidden by a tmpfs in a
#     mount namespace) exit 2 with the one-line message; bad usage exit 2.
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
# Another userland's or architecture's cell has its own command, linked
# against its C library and rdma-core (ctest/build.sh tool_for_root); the
# broken build is the default cell's only.
T=${RSVERBS_TOOL:-$(dirname "$RSVERBS_LIB")/rsverbs}
CELL_TOOL=0
if [ -z "${RSVERBS_TOOL:-}" ] && [ -x "${BIN:-ctest/out/bin}/rsverbs" ]; then
	T=$BIN/rsverbs CELL_TOOL=1
fi
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
check "selftest: the run's file descriptors as before it" grep -Eq "^fds          as before the run \([0-9]+ open\)$" $W/all.out
if [ $CELL_TOOL = 0 ]; then
	commit=$(cat "$(dirname "$RSVERBS_LIB")/commit" 2>/dev/null)
	check "selftest: the header's rsverbs commit is the build's (${commit:-no build/commit})" \
		sh -c '[ -n "$1" ] && grep -q "^rsverbs      [0-9.]* commit $1 (" "$2"' _ "$commit" $W/all.out
else
	# The cell's command, built by ctest/build.sh: a commit, not "unknown".
	check "selftest: the header names the commit of the cell's command" \
		grep -Eq "^rsverbs      [0-9.]* commit [0-9a-f]{12}(-dirty)? \(" $W/all.out
fi
check "selftest: rdma-core's verbs are libibverbs.so.1's own" grep -Eq "^libibverbs   /.*/libibverbs\.so\.1" $W/all.out
check "selftest: attach and detach ran (no skip but the RC QP's, if any)" \
	sh -c '! grep "skipped:" "$1" | grep -vq "non-UD QP"' _ $W/all.out

"$T" selftest rxe1 --json --report $W/rxe1.json > $W/rxe1.json.out 2> $W/rxe1.json.err
rc=$?
check "selftest rxe1 --json --report FILE: exit 0 (got $rc)" [ "$rc" = 0 ]
if ! command -v python3 >/dev/null; then
	# (Another architecture's userland has no python3.)
	check "selftest --json: different 0, exit 0, the device rxe1 only (grep: no python3 here)" \
		sh -c 'grep -q "\"different\":0,.*\"exit\":0}\$" "$1" && grep -q "\"devices\":\[{\"name\":\"rxe1\"" "$1" && ! grep -q "\"name\":\"rxe0\"" "$1"' _ $W/rxe1.json.out
else check "selftest --json: one object, run > 0, different 0, exit 0, the device rxe1 only" \
	python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["different"]==0 and j["run"]>0 and j["exit"]==0, j; assert [d["name"] for d in j["devices"]]==["rxe1"]; assert j["host"]["kernel"]' $W/rxe1.json.out
fi
check "selftest --report FILE: the file is what stdout got" cmp -s $W/rxe1.json $W/rxe1.json.out

# --limits: both limits driven to the device's refusal, by both libraries,
# on an rxe device of its own (rxelim on the dummy rsvlim0), made here: the
# device's groups are counted per device, and a group the suites before
# this one left allocated would be one fewer to attach. Seen on Linux
# 5.10 (sid's userland): 8,191 attached on rxe1 after compat in the same
# boot, by rdma-core and rsverbs alike, and 8,192 on a device of its own;
# 5.10's rxe counts a device's groups in one pool of max_mcast_grp
# elements (rxe_pool.c rxe_alloc). Which earlier call left the group
# allocated is not known.
LDEV=rxe1
if ip link add rsvlim0 type dummy 2>/dev/null && ip link set rsvlim0 up &&
	rdma link add rxelim type rxe netdev rsvlim0 2> $W/rxelim.err && wait_until 10 test -d /sys/class/infiniband/rxelim; then
	LDEV=rxelim
else
	fail "an rxe device of its own for --limits: $(cat $W/rxelim.err 2>/dev/null)"
fi
start=$SECONDS
"$T" selftest $LDEV --limits > $W/limits.out 2> $W/limits.err
rc=$?
echo "selftest $LDEV --limits: $((SECONDS - start)) s"
check "selftest $LDEV --limits: exit 0 (got $rc; $(tail -1 $W/limits.out))" [ "$rc" = 0 ]
check "selftest --limits: its section, 2 cases identical, no limit left unreached" \
	sh -c 'grep -Eq "^  limits \(--limits\): 2 cases, 2 identical, 0 different" "$1" && ! grep -q "not reached" "$1"' _ $W/limits.out
maxgrp=$(ibv_devinfo -v -d $LDEV | sed -n 's/^[[:space:]]*max_mcast_grp:[[:space:]]*//p')
maxqp=$(ibv_devinfo -v -d $LDEV | sed -n 's/^[[:space:]]*max_mcast_qp_attach:[[:space:]]*//p')
[ $LDEV = rxelim ] && rdma link del rxelim 2>/dev/null
ip link del rsvlim0 2>/dev/null # (also when rxelim could not be made on it)
check "selftest --limits: max_mcast_grp groups attached, the next refused, all detached (ibv_devinfo: ${maxgrp:-?})" \
	grep -Eq "^    groups on one QP: $maxgrp attached, then refused: ret=-?[0-9]+ errno=[0-9]+ [A-Z]+; $maxgrp detached again$" $W/limits.out
check "selftest --limits: max_mcast_qp_attach QPs attached, the next refused, all detached (ibv_devinfo: ${maxqp:-?})" \
	grep -Eq "^    QPs on one group: $maxqp attached, then refused: ret=-?[0-9]+ errno=[0-9]+ [A-Z]+; $maxqp detached again$" $W/limits.out

# --join: explicit memberships of G on rxe1 (dummy0) through rsverbs and
# through librdmacm, the sequence of member.c seq, each step's answer and
# dummy0's /proc/net/igmp membership after it; with each engine that joins
# at IP level, an attach that joins too. The broken build makes rsverbs'
# send-only joins full ones: exit 1, that step named.
G=239.77.5.9
ip -4 maddr show dev dummy0 > $W/igmp.before
for engine in default RSVERBS_MCAST_IPJOIN=1 RSVERBS_MCAST_FABRICJOIN=roce; do
	e=(); [ $engine = default ] || e=("$engine")
	start=$SECONDS
	env "${e[@]}" "$T" selftest rxe1 --join $G > $W/join.$engine.out 2> $W/join.$engine.err
	rc=$?
	echo "selftest rxe1 --join $G ($engine): $((SECONDS - start)) s"
	o=$W/join.$engine.out
	check "selftest rxe1 --join $G ($engine): exit 0 (got $rc; $(tail -1 $o))" [ "$rc" = 0 ]
	check "selftest --join ($engine): librdmacm's answers and IGMP state at all 9 steps, rsverbs' the same" \
		test "$(grep -c "^    --join $G: [a-z].*: ret=-\?[0-9]* errno=[0-9A-Z ]* member=[01]\$" $o)" -ge 9
	check "selftest --join ($engine): a send-only member is no IGMP member; beside a full one, its leave keeps the group" \
		sh -c 'grep -qx "    --join $2: join send-only: ret=0 errno=0 member=0" "$1" &&
			grep -qx "    --join $2: join full beside it: ret=0 errno=0 member=1" "$1" &&
			grep -qx "    --join $2: leave send-only (the full member stays): ret=0 errno=0 member=1" "$1" &&
			grep -qx "    --join $2: leave of what is not joined: ret=-1 errno=99 EADDRNOTAVAIL member=0" "$1"' _ $o $G
	if [ $engine = default ]; then
		check "selftest --join (no engine): the join-bearing attach said not compared" grep -q "the join-bearing attach not compared: rsverbs' attach joins at IP level only with" $o
	else
		check "selftest --join ($engine): an attach that joins, as librdmacm's join and libibverbs' attach, member then not" \
			grep -qx "    --join $G: an attach that joins, then its detach (rdma_join_multicast_ex and ibv_attach_mcast): ret=0 errno=0 member=1, then ret=0 errno=0 member=0" $o
	fi
	check "selftest --join ($engine): its fds as before the run" grep -q "^fds          as before the run" $o
done
if [ -x "$BROKEN" ]; then
	"$BROKEN" selftest rxe1 --join $G > $W/join.broken.out 2> $W/join.broken.err
	rc=$?
	check "selftest --join, rsverbs' send-only joins made full on purpose: exit 1 (got $rc), the step named" \
		sh -c '[ "$1" = 1 ] && grep -A2 "^    DIFFERENT --join $3: join send-only\$" "$2" | grep -q "^      rsverbs: .* bytes\[0\.\.1\]=01\$"' _ $rc $W/join.broken.out $G
fi
check "selftest --join: dummy0's IPv4 memberships as before (ip -4 maddr)" cmp -s $W/igmp.before <(ip -4 maddr show dev dummy0)
"$T" selftest --join 10.1.1.1 > /dev/null 2> $W/join.usage.err
rc=$?
check "selftest --join 10.1.1.1 (not multicast): bad usage, exit 2 (got $rc)" \
	sh -c '[ "$1" = 2 ] && grep -q "not a multicast address" "$2"' _ $rc $W/join.usage.err

# ---- 2. rsverbs preloaded ------------------------------------------------------
LD_PRELOAD=$RSVERBS_LIB "$T" selftest rxe0 > $W/preload.out 2> $W/preload.err
rc=$?
check "selftest with librsverbs.so.1 preloaded: exit 0 (got $rc)" [ "$rc" = 0 ]
check "selftest preloaded: rdma-core's verbs still libibverbs.so.1's own, the preload named" \
	sh -c 'grep -Eq "^libibverbs   /.*/libibverbs\.so\.1" "$1" && grep -q "^LD_PRELOAD   .*librsverbs.so.1" "$1"' _ $W/preload.out

# ---- 3. a library broken on purpose -------------------------------------------------
if [ $CELL_TOOL = 1 ]; then
	echo "skip selftest broken build: the default cell's only (this cell has its own command)"
elif [ ! -x "$BROKEN" ]; then
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
# preload NAME WHAT: $W/NAME.c (written below) built into $W/NAME.so, a
# preload of this test's own; fails, with a FAIL line for WHAT, when it
# does not compile.
preload() {
	cc -shared -fPIC -o "$W/$1.so" "$W/$1.c" -ldl 2> "$W/$1.cc.err" && return 0
	fail "$2: the preload compiles ($(head -1 "$W/$1.cc.err"))"
	return 1
}
# SIGINT midway, at a known point: a preload that raises it in the command's
# first ibv_create_qp (the PD and CQ exist, the QP is made; a run takes
# about a second, too short to hit with kill from here).
cat > $W/sigint.c <<'EOC'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
void *ibv_create_qp(void *pd, void *attr)
{
	/* dlvsym: libibverbs also defines ibv_create_qp@IBVERBS_1.0 (the
	 * compat one, of struct ibv_pd_1_0); the command binds IBVERBS_1.1. */
	void *(*real)(void *, void *) = (void *(*)(void *, void *))dlvsym(RTLD_NEXT, "ibv_create_qp", "IBVERBS_1.1");
	void *qp = real(pd, attr);
	static int raised;
	if (!raised++)
		raise(SIGINT);
	return qp;
}
EOC
if preload sigint "selftest SIGINT"; then
	LD_PRELOAD=$W/sigint.so "$T" selftest > $W/int.out 2> $W/int.err
	rc=$?
	check "selftest stopped by SIGINT after its QP was made: exit 2, interrupted and released said (got $rc)" \
		sh -c '[ "$1" = 2 ] && grep -q "interrupted: not every case ran" "$2" && grep -q "every object made was released" "$3"' _ $rc $W/int.out $W/int.err
	check "selftest after SIGINT: the device's QPs as before" [ "$(qps)" = "$QPS_BEFORE" ]
fi
# A file descriptor left open during the run: a preload whose ibv_create_cq
# opens /dev/null and keeps it.
cat > $W/fdleak.c <<'EOC'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
void *ibv_create_cq(void *ctx, int cqe, void *cq_context, void *channel, int vector)
{
	void *(*real)(void *, int, void *, void *, int) = (void *(*)(void *, int, void *, void *, int))dlvsym(RTLD_NEXT, "ibv_create_cq", "IBVERBS_1.1");
	open("/dev/null", O_RDONLY | O_CLOEXEC);
	return real(ctx, cqe, cq_context, channel, vector);
}
EOC
if preload fdleak "selftest fd check"; then
	LD_PRELOAD=$W/fdleak.so "$T" selftest rxe0 > $W/fdleak.out 2> $W/fdleak.err
	rc=$?
	check "selftest, an fd left open during the run: exit 1 (got $rc), the fd named, every case identical" \
		sh -c '[ "$1" = 1 ] && grep -Eq "^  left open  [0-9]+ -> /dev/null$" "$2" &&
			grep -q "^result: [0-9]* cases, [0-9]* identical, 0 different: the run.s file descriptors are not as before it" "$2"' _ $rc $W/fdleak.out
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
"$T" selftest --limit > $W/usage.out 2> $W/usage.err
rc=$?
check "selftest --limit (no such option): bad usage, exit 2 (got $rc)" [ "$rc" = 2 ]
"$T" selftest nosuch0 > $W/unknown.out 2> $W/unknown.err
rc=$?
check "selftest nosuch0: exit 2 (got $rc)" [ "$rc" = 2 ]

finish
