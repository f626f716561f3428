# Sourced by ctest/vm/compat.sh, ctest/vm/trace.sh and demo/guest.sh (not a
# suite: the runner only runs ctest/vm/*.sh): uretprobes on the five verbs
# of a library, counted from tracefs.
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
