# Reads `strace -f` output of `bench count` and prints one line per region
# delimited by write(-1, "MARK <label>", ...):
#   label <TAB> number of system calls <TAB> breakdown by call and result
# Regions labelled "end" are not printed.
function detail(   s, k) { s = ""; for (k in kinds) s = s (s ? ", " : "") kinds[k] "× " k; return s }
function flush() { if (label != "" && label != "end") print label "\t" n "\t" detail() }
/write\(-1, "MARK / {
	flush()
	match($0, /"MARK [^"]*"/)
	label = substr($0, RSTART + 6, RLENGTH - 7); n = 0
	for (k in kinds) delete kinds[k]
	next
}
/^[0-9]+ +[a-z_0-9]+\(/ && label != "" && label != "end" {
	n++
	split($2, a, "("); name = a[1]
	if (match($0, /= -1 [A-Z]+/)) name = name " → " substr($0, RSTART + 5, RLENGTH - 5)
	else if (match($0, /= [0-9]+$/)) name = name " → " substr($0, RSTART + 2)
	kinds[name]++
}
END { flush() }
