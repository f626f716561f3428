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
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
W=$(mktemp -d)
trap 'mkdir -p "$RESULTS_DIR/faults" && cp -r "$W"/. "$RESULTS_DIR/faults/"; rm -rf "$W"' EXIT
P=$BIN/faults
TMO=${FAULTS_TIMEOUT:-900}

one() { # one LABEL ENV...: a run, one result per injected fault
	local label=$1 out=$W/$1.out; shift
	# The census line of each scenario, as it comes: the progress line.
	timeout "$TMO" env "$@" "$P" rxe1 dummy0 2> "$W/$label.err" | tee "$out" |
		sed -u -n "s/^census /faults: $label: census /p"
	local rc=${PIPESTATUS[0]}
	while read -r _ rest; do
		case $rest in *" ok"*) pass "$label: $rest" ;; *) fail "$label: $rest" ;; esac
	done < <(grep '^inject ' "$out")
	check "$label: exits 0 (rc $rc; $(grep '^faults: ' "$out"))" test "$rc" -eq 0
	[ "$rc" -eq 0 ] || tail -3 "$W/$label.err" >&2
}
one plain FAULTS_LIB=rsverbs LD_PRELOAD="$RSVERBS_LIB"
one features FAULTS_LIB=rsverbs LD_PRELOAD="$RSVERBS_LIB" RSVERBS_MCAST_IPJOIN=1 RSVERBS_TRACE="hints:$W/trace"
one fabric FAULTS_LIB=rsverbs LD_PRELOAD="$RSVERBS_LIB" RSVERBS_MCAST_FABRICJOIN=roce RSVERBS_TRACE="hints:$W/trace.fabric"

timeout "$TMO" env FAULTS_LIB=rdma-core "$P" --command rxe1 dummy0 > "$W/ref.out" 2> "$W/ref.err"
grep '^command ' "$W/ref.out" > "$W/ref.command"
grep '^command ' "$W/plain.out" > "$W/plain.command"
check "the kernel command failed in the warm state: rsverbs answers as rdma-core ($(wc -l < "$W/ref.command") cases)" \
	diff -u "$W/ref.command" "$W/plain.command"
check "rdma-core's answers are there" test "$(grep -c 'rc=[1-9]' "$W/ref.command")" -ge 9

inj=0 sur=0
for f in "$W/plain.out" "$W/features.out"; do
	l=$(grep '^faults: ' "$f") || continue
	set -- $l
	inj=$((inj + $2)) sur=$((sur + $4))
done
echo "faults: $inj injected, $sur survived"
echo "faults: $inj injected, $sur survived" > "$W/summary"
finish
