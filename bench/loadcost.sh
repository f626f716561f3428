# shellcheck shell=bash
# Sourced by bench/guest.sh: what preloading costs a process that never
# calls a verb. Interleaved, LOAD_ROUNDS rounds of LOAD_N spawns each:
#   /bin/true alone; with LD_PRELOAD of librsverbs.so.1; of libibverbs.so.1
#   (what every rdma-core program loads anyway); of an empty C library
#   (the dynamic loader's cost of one more object, the floor).
# Then dlopen(RTLD_NOW) time and RSS growth in fresh processes, and the
# files' sizes. Writes $W/loadcost.md. Needs BIN, LIB.
LOAD_ROUNDS=${BENCH_LOAD_ROUNDS:-5}
LOAD_N=${BENCH_LOAD_N:-200}

run_loadcost() {
  local r w ibv empty out
  # The loader's own path for it, whatever the architecture's multiarch
  # directory (/lib/aarch64-linux-gnu/..., /lib/x86_64-linux-gnu/...).
  ibv=$(ldconfig -p | awk '$1 == "libibverbs.so.1" { print $NF; exit }')
  [ -n "$ibv" ] || die "ldconfig -p names no libibverbs.so.1"
  ibv=$(readlink -f "$ibv")
  empty=$BIN/lib/libempty.so
  declare -A what=([true]="" [rsverbs]=$LIB [libibverbs]=$ibv [empty]=$empty)
  : > "$W/load.tsv"
  for r in $(seq 1 "$LOAD_ROUNDS"); do
    for w in true rsverbs libibverbs empty; do
      if [ -z "${what[$w]}" ]; then
        out=$("$BIN/spawn" run "$LOAD_N" /bin/true) || die "spawn /bin/true"
      else
        out=$(env LD_PRELOAD="${what[$w]}" "$BIN/spawn" run "$LOAD_N" /bin/true) || die "spawn with $w"
      fi
      printf '%s\t%s\t%s\n' "$w" "$r" "${out#median_ns }" >> "$W/load.tsv"
    done
  done
  for w in rsverbs libibverbs empty; do
    for r in $(seq 1 20); do "$BIN/spawn" dlopen "${what[$w]}" | tr '\n' ' '; echo; done |
      awk -v w="$w" '
        function med(a, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
          return a[int((n + 1) / 2)] }
        { t[NR] = $2; k[NR] = $4 } END { printf "%s\t%d\t%d\n", w, med(t, NR), med(k, NR) }'
  done > "$W/dlopen.tsv"
  cp "$W/load.tsv" "$W/dlopen.tsv" "$OUT/"
  {
    echo "| preloaded into \`/bin/true\` | median spawn+exit | added to \`/bin/true\` | added ÷ libibverbs' |"
    echo "|---|---:|---:|---:|"
    awk -F'\t' '
      function med(a, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
      { v[$1, $2] = $3; if ($2 > R) R = $2 }
      END {
        split("true rsverbs libibverbs empty", ws, " ")
        for (i = 1; i <= 4; i++) { n = 0; for (r = 1; r <= R; r++) { a[++n] = v[ws[i], r] - v["true", r] } add[ws[i]] = med(a, n)
          n = 0; for (r = 1; r <= R; r++) b[++n] = v[ws[i], r]; tot[ws[i]] = med(b, n) }
        name["true"] = "nothing"; name["rsverbs"] = "librsverbs.so.1"; name["libibverbs"] = "libibverbs.so.1"; name["empty"] = "an empty C library"
        for (i = 1; i <= 4; i++) { w = ws[i]
          printf "| %s | %.0f µs | %s | %s |\n", name[w], tot[w] / 1000, w == "true" ? "–" : sprintf("%.0f µs", add[w] / 1000),
            w == "true" ? "–" : sprintf("%.2f", add[w] / add["libibverbs"]) }
      }' "$W/load.tsv"
    echo
    echo "| library | dlopen(RTLD_NOW), fresh process (median of 20) | RSS added | file size | stripped |"
    echo "|---|---:|---:|---:|---:|"
    while IFS=$'\t' read -r w t k; do
      strip -o "$W/stripped" "${what[$w]}" 2> /dev/null || cp "${what[$w]}" "$W/stripped"
      echo "| $w | $((t / 1000)) µs | $k kB | $(stat -L -c %s "${what[$w]}") bytes | $(stat -c %s "$W/stripped") bytes |"
    done < "$W/dlopen.tsv"
  } > "$W/loadcost.md"
}
