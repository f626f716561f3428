#!/bin/bash
# make fanout: RoCE v2 multicast from 1 sender to N receivers, each a qemu
# guest with rxe2 on its eth0, all on one L2 segment (qemu -netdev
# socket,mcast= on a random group and port per N).  See testbed/README.md
# ("Fan-out") and docs/fanout.md.
#
#   FANOUT_NS="2 8 24"                 the receiver counts
#   FANOUT_FULL="a b c c.rsv d e e.rsv f f.rsv"   scenarios at the smallest N
#   FANOUT_MAIN="a b d"                scenarios at every other N
#   FANOUT_BREAK=1                     receiver 0 drops a datagram in a (self-test)
#
# Per N: a table (receivers, datagrams sent, received per receiver min/max,
# duplicates, member losses, verdict) and the wall time; everything in
# ctest/out/fanout/.  Exit status non-zero on any failed expectation; the
# last line is "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
repo=$PWD
CACHE=$(realpath -m "${RSVERBS_CACHE:-$HOME/.cache/rsverbs}")
read -ra NS <<<"${FANOUT_NS:-2 8 24}"
FULL=${FANOUT_FULL:-a b c c.rsv d e e.rsv f f.rsv}
MAIN=${FANOUT_MAIN:-a b d}
OUT=$repo/ctest/out/fanout
export RESULTS_DIR=$OUT SUITE=fanout
mkdir -p "$OUT"
# shellcheck source=ctest/lib.sh
. ctest/lib.sh

say() { printf 'fanout: %s\n' "$*" >&2; }
[[ -f build/librsverbs.so.1 ]] || { say "build/librsverbs.so.1 missing: run make first"; exit 2; }
ctest/build.sh >/dev/null || { say "ctest/build.sh failed"; exit 2; }
testbed/vm.sh prepare >/dev/null 2>&1 || { say "testbed/vm.sh prepare failed"; exit 2; }

# The machine runs one test-bed boot at a time: this script holds the lock
# for all its guests together.
# (RSVERBS_VM_LOCK_HELD=1: a caller holds it already.)
if [[ ${RSVERBS_VM_LOCK_HELD:-} != 1 ]]; then
	exec {lockfd}>>"$CACHE/vm.lock"
	if ! flock -n "$lockfd"; then
		say "waiting for $CACHE/vm.lock: another guest is running"
		flock "$lockfd"
	fi
	export RSVERBS_VM_LOCK_HELD=1
fi

# no_timer_check: with 25 one-vCPU TCG guests on 2 cores a guest's vCPU
# can be starved through the kernel's boot-time timer test, which then
# panics with "IO-APIC + timer doesn't work!" (arch/x86/kernel/apic/io_apic.c,
# check_timer; seen once at N = 24).  The parameter skips that test
# (timer_irq_works returns 1), as is usual for virtual machines.
export RSVERBS_KERNEL_ARGS="${RSVERBS_KERNEL_ARGS:-} no_timer_check"

summary=$OUT/summary.md
{
	echo "# make fanout, $(date -u +%FT%TZ), kernel ${RSVERBS_KERNEL:-bookworm}, $(git rev-parse --short HEAD)"
	echo
} >"$summary"

# A UDP port nobody on this host has bound (qemu's segment is group:port).
free_port() {
	local p
	for _ in {1..50}; do
		p=$((20000 + RANDOM % 40000))
		ss -Hlun "sport = :$p" | grep -q . || { echo $p; return; }
	done
	echo $((20000 + RANDOM % 40000))
}

# boot_all N SCENARIOS DIR: 1 sender + N receivers, all in the background;
# prints a progress line every 10 s until every guest has stopped.
boot_all() {
	local n=$1 scens=$2 dir=$3 seg pids=() i t0=$SECONDS up cur
	seg=230.$((RANDOM % 256)).$((RANDOM % 256)).$((1 + RANDOM % 254)):$(free_port)
	say "N=$n: segment $seg, $((n + 1)) guests, scenarios: $scens"
	for ((i = 0; i <= n; i++)); do
		local role=recv id=$((i - 1))
		((i == 0)) && role=send id=0
		mkdir -p "$dir/g$i"
		testbed/vm.sh run --timeout 1200 --smp 1 --mem 512 --out "$dir/g$i" \
			--net "$seg" --mac "$(printf '52:54:00:77:%02x:%02x' $((i / 256)) $((i % 256)))" \
			--ip "10.77.$((i / 250)).$((i % 250 + 1))/16" \
			-- env FANOUT_BREAK="${FANOUT_BREAK:-0}" testbed/fanout_guest.sh $role $id "$n" "$scens" \
			>"$dir/g$i.log" 2>&1 &
		pids+=($!)
	done
	while :; do
		local alive=0
		for i in "${pids[@]}"; do kill -0 "$i" 2>/dev/null && alive=$((alive + 1)); done
		((alive)) || break
		up=$(grep -l 'rxe2 up after' "$dir"/g*/serial.log 2>/dev/null | wc -l)
		cur=$(grep -o '^\[[^]]*\] begin' "$dir/g0.log" 2>/dev/null | tail -1 | tr -d '[]' | cut -d' ' -f1)
		say "N=$n: $up/$((n + 1)) guests up, $alive running, sender at scenario ${cur:--}, $((SECONDS - t0)) s"
		sleep 10
	done
	for i in "${pids[@]}"; do wait "$i"; done
}

# The receivers' attach/detach calls of scenario S (main and witness QP),
# one "id verb qp rc errno" per line, sorted: compared between library runs.
calls() { grep -h "^\[$1\] CALL " "$2"/g*.log | cut -d' ' -f3- | LC_ALL=C sort; }

# table N DIR SCENARIO...: rows from the sender's report, plus verdicts.
table() {
	local n=$1 dir=$2 s
	shift 2
	printf '| scenario | receivers | sent | received min | received max | dup | member losses | extra | verdict |\n'
	printf '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n'
	for s in "$@"; do
		if [[ $s == f* ]]; then
			local ok bad
			ok=$(grep -h "^\[$s\] MCKEY id=" "$dir"/g*.log | grep -c 'rc=0$')
			bad=$(grep -h "^\[$s\] MCKEY id=" "$dir"/g*.log | grep -vc 'rc=0$')
			# mckey reports no counts: each of the n+1 must exit 0 (all 20 messages)
			printf '| %s (mckey, %d of %d exit 0) | %d | 20 | - | - | - | - | - | %s |\n' "$s" "$ok" $((n + 1)) "$n" \
				"$(if [[ $ok == $((n + 1)) && $bad == 0 ]]; then echo ok; else echo FAIL; fi)"
			continue
		fi
		grep -h "^\[$s\] \(SENT\|RECV\|VERDICT\)" "$dir/g0.log" | awk -v s="$s" -v n="$n" '
			/ SENT / { for (i = 3; i <= NF; i++) { split($i, kv, "="); sent[kv[1]] = kv[2] } }
			/ RECV / { r++; for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
				if (r == 1 || v["got"] < min) min = v["got"]
				if (r == 1 || v["got"] > max) max = v["got"]
				dup += v["dup"]; lost += v["lost"]; extra += v["extra"]; if ($NF != "ok") bad++ }
			/ VERDICT / { verdict = $3 }
			END { if (r != n) { verdict = "FAIL (" r + 0 " of " n " receivers reported)" }
				else if (bad) verdict = "FAIL"
				# expect none: nothing may arrive, so "losses" mean nothing
				printf "| %s (%s) | %d | %d | %d | %d | %d | %s | %d | %s |\n", s, sent["expect"], r, sent["datagrams"],
					min, max, dup, sent["expect"] == "none" ? "-" : lost + 0, extra,
					verdict == "" ? "FAIL (no verdict)" : verdict }'
	done
}

for n in "${NS[@]}"; do
	if ! [[ $n =~ ^[0-9]+$ ]] || ((n < 1 || n > 64)); then
		say "FANOUT_NS: $n is not 1..64"
		exit 2
	fi
	scens=$MAIN
	[[ $n == "${NS[0]}" ]] && scens=$FULL
	dir=$OUT/N$n
	rm -rf "$dir"
	mkdir -p "$dir"
	t0=$SECONDS
	boot_all "$n" "$scens" "$dir"
	wall=$((SECONDS - t0))
	read -ra sl <<<"$scens"
	tbl=$(table "$n" "$dir" "${sl[@]}")
	{
		echo "## N = $n receivers (+1 sender): wall time $wall s"
		echo
		echo "$tbl"
		echo
	} | tee -a "$summary"
	# Every scenario's verdict, and every sender/receiver program's exit.
	while read -r row; do
		s=$(cut -d'|' -f2 <<<"$row" | xargs)
		if [[ $row == *"| ok |" ]]; then pass "N=$n $s"; else fail "N=$n $s: $row"; fi
	done < <(grep '^| [a-f]' <<<"$tbl")
	for s in "${sl[@]}"; do
		[[ $s == f* ]] && continue
		bad=$(grep -h "^\[$s\] exit " "$dir"/g*.log | grep -vc ' exit 0$')
		got=$(cat "$dir"/g*.log | grep -c "^\[$s\] exit ")
		if ((bad == 0 && got == n + 1)); then pass "N=$n $s: $got programs exit 0"; else
			fail "N=$n $s: $((got - bad)) of $((n + 1)) programs exited 0"; fi
	done
	# Attach/detach results: rsverbs preloaded == rdma-core, call by call.
	for pair in "a b" "c c.rsv" "e e.rsv" "c d"; do
		read -r x y <<<"$pair"
		[[ " $scens " == *" $x "* && " $scens " == *" $y "* ]] || continue
		if [[ -n $(calls "$x" "$dir") ]] && diff <(calls "$x" "$dir") <(calls "$y" "$dir") >"$dir/calls-$x-$y.diff"; then
			pass "N=$n attach/detach results of $y identical to $x ($(calls "$x" "$dir" | wc -l) calls)"
		else
			fail "N=$n attach/detach results of $y differ from $x (see $dir/calls-$x-$y.diff)"
		fi
	done
	say "N=$n: done in $wall s"
done
echo "results: $summary" >&2
finish >&2
st=$?
# The closing line, as ctest/summary.sh prints it.
echo "$(grep -c '^PASS' "$OUT/fanout.results") passed, $(grep -c '^FAIL' "$OUT/fanout.results") failed"
exit $st
