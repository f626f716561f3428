#!/bin/bash
# One guest of the fan-out (testbed/fanout.sh boots 1 sender + N receivers,
# each running this): runs every scenario of the list in order, as the
# sender (10.77.0.1, coordinates over TCP) or as receiver ID.  Every line of
# output is "[SCENARIO] ...", parsed on the host.
#
#   testbed/fanout_guest.sh send|recv ID N "SCENARIO..."
#
# Scenarios (Q_Key 0x11111111 for the raw ones, rdma_cm's 0x01234567 for mckey):
#   a      rdma-core, raw attach, IP-level join in the program        expect all
#   b      a with rsverbs preloaded                                   expect all
#   c      rdma-core, raw attach, no IP-level join                    expect none
#   c.rsv  c with rsverbs preloaded                                   expect none
#   d      c with rsverbs preloaded and RSVERBS_MCAST_IPJOIN=1        expect all
#   e      a with join/leave between bursts (plan joinleave)          expect all
#   e.rsv  e with rsverbs preloaded
#   f      mckey (rdma_cm IPv4 join) across hosts, rdma-core          expect all
#   f.rsv  f with rsverbs preloaded
# FANOUT_BREAK=1: receiver 0 drops seq 5 of scenario a (the self-test).
set -uo pipefail
role=$1 id=$2 n=$3
read -ra scens <<<"$4"
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=$repo/ctest/out/bin
server=10.77.0.1
lib=$repo/build/librsverbs.so.1

idx=0
for s in "${scens[@]}"; do
	idx=$((idx + 1))
	group=239.77.$idx.1 port=$((7700 + idx))
	pre=() join=() plan=all expect=all bursts=10 burst=200 kind=raw skip=()
	case $s in
	a) join=(--join) ;;
	b) join=(--join) pre=(LD_PRELOAD="$lib") ;;
	c) expect=none bursts=2 ;;
	c.rsv) expect=none bursts=2 pre=(LD_PRELOAD="$lib") ;;
	d) pre=(LD_PRELOAD="$lib" RSVERBS_MCAST_IPJOIN=1) ;;
	e) join=(--join) plan=joinleave bursts=6 burst=50 ;;
	e.rsv) join=(--join) plan=joinleave bursts=6 burst=50 pre=(LD_PRELOAD="$lib") ;;
	f) kind=mckey ;;
	f.rsv) kind=mckey pre=(LD_PRELOAD="$lib") ;;
	*)
		echo "[$s] unknown scenario"
		continue
		;;
	esac
	if [[ $s == a && ${FANOUT_BREAK:-0} == 1 && $role == recv && $id == 0 ]]; then skip=(--skip 5); fi
	echo "[$s] begin $role $id"
	if [[ $kind == raw && $role == send ]]; then
		env "${pre[@]}" timeout 600 "$bin/fanout" send --port $port --receivers "$n" --plan $plan \
			--bursts $bursts --burst $burst --group "$group" --expect $expect 2>&1 | sed -u "s/^/[$s] /"
		echo "[$s] exit ${PIPESTATUS[0]}"
	elif [[ $kind == raw ]]; then
		env "${pre[@]}" timeout 600 "$bin/fanout" recv --server $server --port $port --id "$id" \
			"${join[@]}" "${skip[@]}" --group "$group" --expect $expect 2>&1 | sed -u "s/^/[$s] /"
		echo "[$s] exit ${PIPESTATUS[0]}"
	elif [[ $role == send ]]; then
		# mckey has no control channel: every receiver says "ready" once its
		# mckey has joined, then the sender's mckey sends 20 messages.
		timeout 300 "$bin/fanout" gather --port $port --receivers "$n" 2>&1 | sed -u "s/^/[$s] /"
		env "${pre[@]}" timeout 120 mckey -m "$group" -b "$RSVERBS_NET_IP" -s -C 20 2>&1 | sed -u "s/^/[$s] /"
		echo "[$s] MCKEY id=sender rc=${PIPESTATUS[0]}"
	else
		log=/tmp/mckey.$s
		# stdbuf: mckey printf()s to a file, block-buffered; "joined" must show at once.
		env "${pre[@]}" timeout 300 stdbuf -oL mckey -m "$group" -b "$RSVERBS_NET_IP" -C 20 >"$log" 2>&1 &
		pid=$!
		# At most 60 s for rdma_cm's join; builtins only (a fork is slow
		# under TCG: testbed/README.md, timings).
		joined() { local l; while IFS= read -r l; do [[ $l == "mckey: joined"* ]] && return 0; done <"$log"; return 1; }
		end=$((SECONDS + 60))
		until joined || ((SECONDS >= end)) || ! kill -0 $pid 2>/dev/null; do sleep 0.1; done
		timeout 300 "$bin/fanout" ready --server $server --port $port --id "$id" 2>&1 | sed -u "s/^/[$s] /"
		wait $pid
		rc=$?
		sed "s/^/[$s] /" "$log"
		echo "[$s] MCKEY id=$id rc=$rc"
	fi
done
echo "[all] done"
