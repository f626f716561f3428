#!/usr/bin/env bash
# RSVERBS_MCAST_IPJOIN inside a program that does to a library what real
# programs do (ctest/vm/hostile.c; docs/security.md, promises 4 to 7, and a
# refused detach), on rxe1 (dummy0), preloaded with RSVERBS_MCAST_IPJOIN=1:
#   reuse    the program closes rsverbs' socket, reuses its number for its
#            own and joins the same group: its fd and membership survive a
#            fork and rsverbs' detach (finding 2)
#   v6many   800 IPv6 groups on one QP, all joined: past one socket's
#            optmem_max (finding 3)
#   v4many   1,400 IPv4 groups by 4 threads, all joined: past the old pool
#            of 64 sockets x 20 groups (finding 12)
#   race     4 threads attach and detach one group; after the final detach
#            the group is not joined (finding 5)
#   refused  a detach refused by the kernel keeps the membership
# On b97736c reuse, v6many and v4many fail (the race only now and then).
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
W=$(mktemp -d)
trap 'mkdir -p "$RESULTS_DIR/hostile" && cp -r "$W"/. "$RESULTS_DIR/hostile/"; rm -rf "$W"' EXIT
P=$BIN/hostile
run() { # run NAME ARGS...: one scenario, every check a result
	local name=$1 out=$W/$1.out; shift
	timeout "${HOSTILE_TIMEOUT:-300}" env RSVERBS_MCAST_IPJOIN=1 LD_PRELOAD="$RSVERBS_LIB" "$P" "$name" rxe1 dummy0 "$@" \
		> "$out" 2> "$W/$name.err"
	local rc=$?
	while read -r res line; do
		case $res in ok) pass "$line" ;; FAIL) fail "$line" ;; esac
	done < <(grep -E '^(ok|FAIL) ' "$out")
	check "$name: exits 0 (rc $rc)" test "$rc" -eq 0
	[ "$rc" -eq 0 ] || tail -3 "$W/$name.err" >&2
}
run reuse
run v6many 800
run v4many 1400 4
run race 300 4
run refused
finish
