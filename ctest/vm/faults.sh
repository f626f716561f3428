#!/usr/bin/env bash
# make faults (an opt-in guest suite: ctest/guest_suite.sh runs it only when
# named, and .ci/run runs make faults): every syscall rsverbs makes during
# a verb, failed on purpose at each position with each plausible errno
# (ctest/vm/faults.c; docs/security.md), on rxe1 (dummy0):
#   plain     rsverbs preloaded
#   features  rsverbs preloaded with RSVERBS_MCAST_IPJOIN=1 and
#             RSVERBS_TRACE=hints:FILE (their sockets, setsockopt, the sink)
#   fabric    rsverbs preloaded with RSVERBS_MCAST_FABRICJOIN=roce and the
#             trace (the rdma_cm fd: its open, fcntl and fstat, every
#             command's write, the join's bounded ppoll; docs/fabric-join.md)
# Every injected run must survive: no crash, the verb's answer well formed,
# no fd leaked, the program's own socket and membership untouched. And the
# verb's kernel command failed with E in the warm state gives the same
# answer as rdma-core's with the same failure (FAULTS_LIB=rdma-core).
# Besides the syscalls, three axes on each path (ctest/vm/faults.c):
#   allocation    the library's N-th allocation during the verb failed, for
#                 every N its census counts: the census' answer
#   cancellation  pthread_cancel (deferred) before the verb and while it
#                 waits in each of its syscalls whose call site (syscall,
#                 object, offset) is new to the path (FAULTS_CANCEL=all:
#                 every position; docs/security.md): the verb returns with
#                 the census' answer, the thread is cancelled after it, and
#                 a later attach from another thread finds no lock held
#   small stack   the verb from a handler on an 8 KiB sigaltstack over a
#                 guard page: the census' answer
# and the library imports none of glibc's cancellation points (its
# syscalls are raw: src/sys.rs). One summary line per axis. FAULTS_AXES
# (some of "syscall allocation cancellation small-stack") and FAULTS_PATHS
# (some of "plain features fabric") run fewer (make faults: all).
# On InfiniBand from ctest/vm/sibfaults.sh (make check-sib, SUITE=faults_ib):
# FAULTS_DEV=sib0 FAULTS_NETDEV=ib0 (its IPoIB netdev, which holds the
# program's own IPv4 membership), FAULTS_IB=1 and FAULTS_LID (the verbs'
# groups as InfiniBand MGIDs with a multicast LID: ctest/vm/faults.c),
# FAULTS_FABRIC=1 (the fabric join's InfiniBand switch, for roce) and
# FAULTS_PATHS="plain fabric".
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
W=$(mktemp -d)
trap 'mkdir -p "$RESULTS_DIR/$SUITE" && cp -r "$W"/. "$RESULTS_DIR/$SUITE/"; rm -rf "$W"' EXIT
P=$BIN/faults
DEV=${FAULTS_DEV:-rxe1} NETDEV=${FAULTS_NETDEV:-dummy0}
TMO=${FAULTS_TIMEOUT:-900}

one() { # one LABEL ENV...: a run, one result per injected fault
	local label=$1 out=$W/$1.out; shift
	grep -qw "$label" <<< "${FAULTS_PATHS:-plain features fabric}" || return 0
	# The census lines of each scenario, as they come: the progress lines.
	timeout "$TMO" env "$@" "$P" "$DEV" "$NETDEV" 2> "$W/$label.err" | tee "$out" |
		sed -u -n "s/^census/faults: $label: census/p"
	local rc=${PIPESTATUS[0]}
	while read -r _ rest; do
		case $rest in *" ok"*) pass "$label: $rest" ;; *) fail "$label: $rest" ;; esac
	done < <(grep '^inject ' "$out")
	check "$label: exits 0 (rc $rc; $(grep '^faults: ' "$out" | tr '\n' ' '))" test "$rc" -eq 0
	[ "$rc" -eq 0 ] || tail -3 "$W/$label.err" >&2
}
one plain FAULTS_LIB=rsverbs LD_PRELOAD="$RSVERBS_LIB"
one features FAULTS_LIB=rsverbs LD_PRELOAD="$RSVERBS_LIB" RSVERBS_MCAST_IPJOIN=1 RSVERBS_TRACE="hints:$W/trace"
one fabric FAULTS_LIB=rsverbs LD_PRELOAD="$RSVERBS_LIB" RSVERBS_MCAST_FABRICJOIN="${FAULTS_FABRIC:-roce}" RSVERBS_TRACE="hints:$W/trace.fabric"

if [ -f "$W/plain.out" ]; then
	timeout "$TMO" env FAULTS_LIB=rdma-core "$P" --command "$DEV" "$NETDEV" > "$W/ref.out" 2> "$W/ref.err"
	grep '^command ' "$W/ref.out" > "$W/ref.command"
	grep '^command ' "$W/plain.out" > "$W/plain.command"
	check "the kernel command failed in the warm state: rsverbs answers as rdma-core ($(wc -l < "$W/ref.command") cases)" \
		diff -u "$W/ref.command" "$W/plain.command"
	check "rdma-core's answers are there" test "$(grep -c 'rc=[1-9]' "$W/ref.command")" -ge 9
	# Plain, the verbs allocate nothing at all (promise 16): every census says 0.
	check "plain: no verb allocates ($(grep -c '^census [a-z-]*:.* allocations=0 ' "$W/plain.out") of 6 censuses say 0)" \
		test "$(grep -c '^census [a-z-]*:.* allocations=0 ' "$W/plain.out")" -eq 6
fi

# glibc's cancellation points (POSIX.1-2017 2.9.5.2's list as glibc
# implements it, its fortified and 64-bit names, and its own additions:
# nptl/pthread_cancel.c, the wrappers' SYSCALL_CANCEL): the library calls
# none of them (docs/security.md, promise 15), on any path.
CANCEL_POINTS="accept accept4 aio_suspend clock_nanosleep close connect creat creat64 epoll_pwait epoll_pwait2
  epoll_wait fcntl fcntl64 fdatasync fsync lockf lockf64 mq_receive mq_send mq_timedreceive mq_timedsend msgrcv
  msgsnd msync nanosleep open open64 openat openat64 __open_2 __open64_2 __openat_2 __openat64_2 pause poll
  __poll_chk ppoll __ppoll_chk pread pread64 __pread_chk __pread64_chk preadv preadv64 preadv2 preadv64v2 pselect
  pwrite pwrite64 pwritev pwritev64 pwritev2 pwritev64v2 read __read_chk readv recv __recv_chk recvfrom
  __recvfrom_chk recvmmsg recvmsg select sem_clockwait sem_timedwait sem_wait send sendmmsg sendmsg sendto sigpause
  sigsuspend sigtimedwait sigwait sigwaitinfo sleep system tcdrain usleep wait wait3 wait4 waitid waitpid write
  writev pthread_join pthread_timedjoin_np pthread_clockjoin_np pthread_cond_wait pthread_cond_timedwait
  pthread_cond_clockwait pthread_testcancel fopen fopen64 fclose fflush fread fwrite fgets fputs fprintf printf
  dprintf vfprintf getline getdelim syslog"
imports=$(readelf --dyn-syms -W "$RSVERBS_LIB" | awk '$7 == "UND" { sub(/@.*/, "", $8); print $8 }' | sort -u)
called=$(comm -12 <(tr -s ' \n' '\n' <<< "$CANCEL_POINTS" | sort -u) - <<< "$imports" | tr '\n' ' ')
check "the library imports no cancellation point of glibc's ($(wc -l <<< "$imports") imports; ${called:-none of them})" test -z "$called"

# One line per axis, over the three paths; the suite fails unless every
# injected run survived and each axis injected some.
for axis in syscall allocation cancellation "small stack"; do
	[ -z "${FAULTS_AXES:-}" ] || grep -qw "${axis/ /-}" <<< "$FAULTS_AXES" || continue
	inj=0 sur=0
	for f in "$W/plain.out" "$W/features.out" "$W/fabric.out"; do
		l=$(grep "^faults: $axis: " "$f" 2> /dev/null) || continue
		read -r i _ v _ <<< "${l#"faults: $axis: "}"
		inj=$((inj + i)) sur=$((sur + v))
	done
	echo "faults: $axis: $inj injected, $sur survived"
	echo "faults: $axis: $inj injected, $sur survived" >> "$W/summary"
	check "$axis: $inj injected, $sur survived (plain, features, fabric)" test "$inj" -gt 0 -a "$inj" -eq "$sur"
done
finish
