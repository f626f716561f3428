# shellcheck shell=bash
# Shared by bench/guest.sh and bench/smoke_suite.sh (sourced). Needs BIN
# (bench programs), LIB (librsverbs.so.1), LIB_UNTRACED (the same built
# with the RSVERBS_TRACE check compiled out), W (work dir), DEV, TMO, PIN
# (array: CPU pinning prefix) and, for ring_round, LATENCY (contenders).

# The library a preloading contender preloads (none for the others).
preload_of() { case $1 in preloaded) echo "$LIB" ;; untraced) echo "$LIB_UNTRACED" ;; esac; }

# argv of CONTENDER running MODE.
prog() { # prog CONTENDER MODE -> sets P (array)
  case $1 in
    rdma-core | rdma-core-AA) P=("$BIN/bench" "$2") ;;
    relinked) P=("$BIN/bench.rsv" "$2") ;;
    preloaded) P=(env "LD_PRELOAD=$LIB" "$BIN/bench" "$2") ;;
    untraced) P=(env "LD_PRELOAD=$LIB_UNTRACED" "$BIN/bench" "$2") ;;
    floor) P=("$BIN/bench" "$2" --floor) ;;
    *) echo "bench: unknown contender $1" >&2; return 1 ;;
  esac
}

# The served-by line a contender must print.
want_served() {
  case $1 in
    rdma-core | rdma-core-AA) echo 'served-by ibv_attach_mcast=libibverbs.so.1 ibv_detach_mcast=libibverbs.so.1 _ibv_query_gid_ex=libibverbs.so.1' ;;
    relinked | preloaded | untraced) echo 'served-by ibv_attach_mcast=librsverbs.so.1 ibv_detach_mcast=librsverbs.so.1 _ibv_query_gid_ex=librsverbs.so.1' ;;
    floor) echo 'served-by floor' ;;
  esac
}

served_ok() { # served_ok CONTENDER LOGFILE
  grep -q "^$(want_served "$1")" "$2"
}

# ring_round ROUND ARGS...: one `bench time ARGS` process per contender of
# LATENCY, all at once, taking turns block by block around a ring of FIFOs
# (ring order rotated by ROUND). Samples in $W/CONTENDER.ROUND, stderr in
# $W/CONTENDER.ROUND.log. Returns non-zero, with a message, on any failure.
ring_round() {
  local r=$1 n=${#LATENCY[@]} i c pids=() order=()
  shift
  for i in $(seq 0 $((n - 1))); do order+=("${LATENCY[$(((r + i) % n))]}"); done
  rm -f "$W"/ring.* "$W/ready"
  mkfifo "$W/ready" || return 1
  for i in $(seq 0 $((n - 1))); do mkfifo "$W/ring.$i" || return 1; done
  for i in $(seq 0 $((n - 1))); do
    c=${order[$i]}
    prog "$c" time || return 1
    timeout "$TMO" "${PIN[@]}" "${P[@]}" -d "$DEV" "$@" -i "$W/ring.$i" -O "$W/ring.$(((i + 1) % n))" \
      -r "$W/ready" -o "$W/$c.$r" 2> "$W/$c.$r.log" &
    pids+=($!)
  done
  # Everyone set up ("r" from each on ready; "x" from one that failed),
  # then the first token.
  local got
  got=$(timeout "$TMO" head -c "$n" "$W/ready")
  if [ "${#got}" != "$n" ] || [[ $got == *x* ]]; then
    kill "${pids[@]}" 2> /dev/null
    wait
    tail -n 5 "$W"/*."$r".log >&2
    echo "bench: round $r: not every contender got ready" >&2
    return 1
  fi
  printf t > "$W/ring.0"
  RING_ORDER=${order[*]} # for the caller's log
  export RING_ORDER
  for i in $(seq 0 $((n - 1))); do
    c=${order[$i]}
    if ! wait "${pids[$i]}"; then
      kill "${pids[@]}" 2> /dev/null
      wait
      tail -n 5 "$W/$c.$r.log" >&2
      echo "bench: round $r: $c failed (or timed out after $TMO s)" >&2
      return 1
    fi
    if ! served_ok "$c" "$W/$c.$r.log"; then
      cat "$W/$c.$r.log" >&2
      echo "bench: round $r: $c is not served by the expected library" >&2
      return 1
    fi
  done
}
