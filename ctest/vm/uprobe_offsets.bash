# Sourced by ctest/vm/compat.sh and demo/guest.sh (not a suite: the runner
# only runs ctest/vm/*.sh).
# offsets LIB: sets OFF[SYMBOL@@VERSION] to the file offset (what a uprobe
# takes) of the three verbs defined in LIB.
declare -A OFF
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
	done < <(readelf -W -l --dyn-syms "$1" |
		awk '$1 == "LOAD" || $8 ~ /^(ibv_attach_mcast|ibv_detach_mcast|_ibv_query_gid_ex)@@IBVERBS_/')
}
