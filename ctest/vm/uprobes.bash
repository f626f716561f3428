# Sourced by ctest/vm/compat.sh, ctest/vm/trace.sh, ctest/vm/sibswitch.sh
# and demo/guest.sh (not a suite: the runner only runs ctest/vm/*.sh):
# uretprobes on the five verbs of a library, counted from tracefs, and the
# calls a trace file stands for, compared with them (counts_equal: $W/counts).
TR=/sys/kernel/tracing
declare -A OFF
PROBES=() PROBE_GROUP="" BUFKB=""

# offsets LIB: sets OFF[SYMBOL@@VERSION] to the file offset (what a uprobe
# takes) of the five verbs defined in LIB.
offsets() {
	local -a load=()
	local a b c f g h va seg
	OFF=()
	while read -r a b c _ _ f g h; do
		if [ "$a" = LOAD ]; then
			load+=("$b $c $f")
		elif [ "$g" != UND ]; then
			va=$((16#$b))
			for seg in "${load[@]}"; do
				set -- $seg
				((va >= $2 && va < $2 + $3)) && printf -v "OFF[$h]" '0x%x' $((va - $2 + $1))
			done
		fi
	done < <(readelf -W -l --dyn-syms "$1" | sed 's/\[<localentry>: [0-9]*\] //' |
		awk '$1 == "LOAD" || $8 ~ /^(ibv_attach_mcast|ibv_detach_mcast|_ibv_query_gid_ex|ibv_query_gid|_ibv_query_gid_table)@@IBVERBS_/')
	# (ppc64's readelf puts "[<localentry>: N]" before the section of an
	# ELFv2 function: dropped; the probe goes on the global entry, where
	# calls from other objects arrive.)
}

# probes_on GROUP BUFKB NAME=LIB...: a uretprobe on attach, detach, gid
# (_ibv_query_gid_ex), qgid (ibv_query_gid) and table (_ibv_query_gid_table)
# of each LIB, named NAME_VERB (VERB alone for an empty NAME), in the tracefs
# event group GROUP, recording the return value as rc; the ring buffer is
# BUFKB per CPU until probes_off.
probes_on() {
	local group=$1 kb=$2 spec lib name verb off
	shift 2
	{ mountpoint -q $TR || mount -t tracefs nodev $TR; } 2>/dev/null || return 1
	PROBE_GROUP=$group
	BUFKB=$(sed "s/.*expanded: \([0-9]*\).*/\1/" $TR/buffer_size_kb)
	echo "$kb" > $TR/buffer_size_kb
	for spec in "$@"; do
		name=${spec%%=*} lib=${spec#*=}
		offsets "$lib"
		for verb in attach:ibv_attach_mcast@@IBVERBS_1.1 detach:ibv_detach_mcast@@IBVERBS_1.1 \
			gid:_ibv_query_gid_ex@@IBVERBS_1.11 qgid:ibv_query_gid@@IBVERBS_1.1 \
			table:_ibv_query_gid_table@@IBVERBS_1.11; do
			off=${OFF[${verb#*:}]:-}
			[ -n "$off" ] || return 1
			echo "r:$group/${name:+${name}_}${verb%%:*} $lib:$off rc=\$retval:s32" >> $TR/uprobe_events || return 1
			PROBES+=("${name:+${name}_}${verb%%:*}")
		done
	done
	echo 1 > "$TR/events/$group/enable" && echo 1 > $TR/tracing_on
}

probes_off() {
	local n
	[ ${#PROBES[@]} -gt 0 ] || return 0
	echo 0 > "$TR/events/$PROBE_GROUP/enable"
	for n in "${PROBES[@]}"; do echo "-:$PROBE_GROUP/$n" >> $TR/uprobe_events; done
	PROBES=()
	echo "$BUFKB" > $TR/buffer_size_kb
}

probes_clear() { : > $TR/trace; }

# ---- what the probes counted against what a trace says -----------------------
# "attach=N detach=N gid=N qgid=N table=N": the calls since probes_clear.
probes_count() {
	awk '!/^#/ { for (i = 1; i <= NF; i++) if ($i ~ /^(attach|detach|gid|qgid|table):$/) { sub(/:$/, "", $i); n[$i]++ } }
		END { printf "attach=%d detach=%d gid=%d qgid=%d table=%d\n", n["attach"], n["detach"], n["gid"], n["qgid"], n["table"] }' $TR/trace
}
# The same from trace files: one call per line, N for a line ending "×N".
trace_count() {
	cat "$@" 2>/dev/null | awk '
		function k() { return $NF ~ /^×[0-9]+$/ ? substr($NF, length("×") + 1) + 0 : 1 }
		/^rsverbs\[[0-9]+\]: ibv_attach_mcast / { n["attach"]++ }
		/^rsverbs\[[0-9]+\]: ibv_detach_mcast / { n["detach"]++ }
		/^rsverbs\[[0-9]+\]: _ibv_query_gid_ex / { n["gid"] += k() }
		/^rsverbs\[[0-9]+\]: ibv_query_gid / { n["qgid"] += k() }
		/^rsverbs\[[0-9]+\]: _ibv_query_gid_table / { n["table"]++ }
		END { printf "attach=%d detach=%d gid=%d qgid=%d table=%d\n", n["attach"], n["detach"], n["gid"], n["qgid"], n["table"] }'
}
# counts_equal NAME TRACEFILE...: trace lines vs uretprobe hits since probes_clear.
counts_equal() {
	local name=$1 p t; shift
	p=$(probes_count) t=$(trace_count "$@")
	echo "trace: $name: uretprobes $p; trace lines $t"
	echo "$name probes $p lines $t" >> "$W/counts"
	if [ "$p" = "$t" ] && [ "$p" != "attach=0 detach=0 gid=0 qgid=0 table=0" ]; then
		pass "$name: one trace line per call ($t)"
	else
		fail "$name: trace lines ($t) differ from the calls uretprobes counted ($p)"
	fi
}
# Every line of a trace file has the documented prefix and a known verb or
# hint (docs/trace.md's list; the fabric join's lines are not expected).
well_formed() {
	local bad
	bad=$(grep -cvE '^rsverbs\[[0-9]+\]: (ibv_attach_mcast|ibv_detach_mcast|_ibv_query_gid_ex|ibv_query_gid|_ibv_query_gid_table) |^rsverbs\[[0-9]+\]: hint\[(no-ip-join|not-multicast|not-ud|lid-mismatch|still-attached|limit|qkey-violations|ip-join-failed|no-ipoib|mlid-mismatch|qkey-mismatch|fabric-join-failed|fabric-join-cred-change)\]: ' "$@")
	[ "$bad" = 0 ]
}
