# Shared by robust.sh and robust_san.sh (sourced; not a suite).

# compare LABEL REF OUT: R lines identical, one result per line.
compare() {
  local label=$1 ref=$2 out=$3 same=0 diffs=0 a b
  local nr no
  nr=$(grep -c '^R ' "$ref"); no=$(grep -c '^R ' "$out")
  if [ "$nr" -lt 60 ] || [ "$nr" -ne "$no" ]; then
    fail "$label: $no R lines vs $nr from rdma-core"
  fi
  while IFS=$'\t' read -r a b; do
    if [ "$a" = "$b" ]; then same=$((same + 1)); echo "PASS $label: $a" >> "$RESULTS_DIR/$SUITE.results"
    else diffs=$((diffs + 1)); fail "$label: rdma-core '$a' vs rsverbs '$b'"; fi
  done < <(paste <(grep '^R ' "$ref") <(grep '^R ' "$out"))
  echo "robust: $label: $same identical, $diffs different"
}

# rsverbs_only LABEL OUT: the N and D lines' rsverbs answers.
rsverbs_only() {
  local label=$1 out=$2 n
  n=$(grep -c '^N ' "$out")
  check "$label: $n NULL-argument calls, none crashed, all ret=22 errno=22" \
    sh -c "[ $n -ge 10 ] && ! grep '^N ' '$out' | grep -v 'ret=22 errno=22\$'"
  grep '^N ' "$out" | grep -v 'ret=22 errno=22$' >&2
  check "$label: cmd_fd < 0 attach/detach give EOPNOTSUPP" \
    sh -c "[ \$(grep -c '^D .* ret=95 ' '$out') -eq 3 ]"
}


# asan_bin NAME: prints the directory holding NAME.asan (rdma-core only) and
# NAME.asan.rsv (relinked), ASan builds of ctest/vm/NAME.c: prebuilt on the
# host by `ctest/sanitize.sh asan-build` when fresh, else compiled here into
# the guest's /tmp (slow under TCG: about a minute).
asan_bin() {
  local name=$1 here src inc d=/tmp/asan-bin
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  src=$here/$name.c
  if [ -x "$BIN/$name.asan.rsv" ] && [ "$BIN/$name.asan.rsv" -nt "$src" ] && [ "$BIN/$name.asan.rsv" -nt "$here/common.h" ]; then
    echo "$BIN"; return
  fi
  inc=$(cd "$here/../.." && pwd)/include
  mkdir -p $d
  [ -x $d/$name.asan.rsv ] || {
    cc -O1 -g -fsanitize=address -fno-omit-frame-pointer -D_GNU_SOURCE -I"$inc" -o $d/$name.asan "$src" -libverbs -ldl -lpthread -lm &&
    cc -O1 -g -fsanitize=address -fno-omit-frame-pointer -D_GNU_SOURCE -I"$inc" -o $d/$name.asan.rsv "$src" \
      -L"$(dirname "$RSVERBS_LIB")" -Wl,-rpath,"$(dirname "$RSVERBS_LIB")" -lrsverbs -libverbs -ldl -lpthread -lm
  } >&2
  echo $d
}
