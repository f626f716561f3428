# shellcheck shell=bash
# Sourced by bench/guest.sh: the cost curves. For each curve and point, one
# `curve KIND N` process per contender (rdma-core, relinked, preloaded), in a
# contender order rotated every round, CURVE_ROUNDS rounds; the ratio of a
# point is the median over rounds of contender ÷ rdma-core measured in the
# same round, moments apart. Writes $OUT/curves.tsv:
#   kind  N  contender  round  ns_per_pair
# and $W/curves.md (the table for BENCHMARKS.md). Needs BIN, LIB, DEV, TMO, PIN.
CURVE_ROUNDS=${BENCH_CURVE_ROUNDS:-5}
CURVE_REPS=${BENCH_CURVE_REPS:-2000}
CURVES=("groups:1 64 1024 8192" "qps:1 8 28 56" "contexts:1 8 64" "threads:1 2 4 8")
CURVE_CONTENDERS=(rdma-core relinked preloaded)

curve_prog() { # CONTENDER -> P
  case $1 in
    rdma-core) P=("$BIN/curve") ;;
    relinked) P=("$BIN/curve.rsv") ;;
    preloaded) P=(env "LD_PRELOAD=$LIB" "$BIN/curve") ;;
  esac
}

run_curves() {
  local r spec kind n i c out reps
  : > "$OUT/curves.tsv"
  for r in $(seq 1 "$CURVE_ROUNDS"); do
    for spec in "${CURVES[@]}"; do
      kind=${spec%%:*}
      for n in ${spec#*:}; do
        reps=$CURVE_REPS
        [ "$kind" = threads ] && reps=$((CURVE_REPS / 2))
        for i in 0 1 2; do
          c=${CURVE_CONTENDERS[$(((r + i) % 3))]}
          curve_prog "$c"
          out=$(timeout "$TMO" "${PIN[@]}" "${P[@]}" "$kind" "$n" -d "$DEV" -r "$reps" 2> "$W/curve.err") ||
            { cat "$W/curve.err" >&2; die "curve $kind $n ($c)"; }
          served_ok "$c" "$W/curve.err" || { cat "$W/curve.err" >&2; die "curve: $c not served by the expected library"; }
          printf '%s\t%s\t%s\t%s\t%s\n' "$kind" "$n" "$c" "$r" "${out#ns_per_pair }" >> "$OUT/curves.tsv"
        done
      done
    done
    echo "bench: curves round $r of $CURVE_ROUNDS done at $((SECONDS - START)) s"
  done
  # Per kind and N: rdma-core's median ns, and per contender the median of
  # the per-round ratios.
  awk -F'\t' '
    { v[$1 SUBSEP $2 SUBSEP $3 SUBSEP $4] = $5; if (!(($1 SUBSEP $2) in seen)) { seen[$1 SUBSEP $2] = 1; key[++nk] = $1 SUBSEP $2 }
      if ($4 > rounds) rounds = $4 }
    function med(a, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
    END {
      for (k = 1; k <= nk; k++) {
        split(key[k], kn, SUBSEP)
        n = 0; for (r = 1; r <= rounds; r++) base[++n] = v[kn[1], kn[2], "rdma-core", r]
        b = med(base, n)
        line = sprintf("%s\t%s\t%.0f", kn[1], kn[2], b)
        for (ci = 1; ci <= 2; ci++) {
          c = ci == 1 ? "relinked" : "preloaded"; n = 0
          for (r = 1; r <= rounds; r++) q[++n] = v[kn[1], kn[2], c, r] / v[kn[1], kn[2], "rdma-core", r]
          line = line sprintf("\t%.3f", med(q, n))
        }
        print line
      }
    }' "$OUT/curves.tsv" > "$OUT/curves-ratios.tsv"
  {
    echo "| curve | N | rdma-core, ns per attach+detach pair | relinked ÷ rdma-core | preloaded ÷ rdma-core |"
    echo "|---|---:|---:|---:|---:|"
    awk -F'\t' '{ printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }' "$OUT/curves-ratios.tsv"
  } > "$W/curves.md"
}
