#!/usr/bin/env bash
# Builds the benchmark program twice, into bench/out (needs `make all`):
#   bench      linked against rdma-core only (rdma-core, preload and floor)
#   bench.rsv  relinked with $(pkg-config --libs rsverbs), rsverbs first
# against a private copy of build/librsverbs.so.1 in bench/out/lib, so that
# a run measures one library even if build/ is rebuilt meanwhile.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${RSVERBS_BUILD:-$PWD/build}
out=$PWD/bench/out
lib=$out/lib
[ -e "$B/librsverbs.so.1" ] || { echo "bench/build.sh: $B/librsverbs.so.1 missing: run make all" >&2; exit 1; }
mkdir -p "$lib"
if ! cmp -s "$B/librsverbs.so.1" "$lib/librsverbs.so.1"; then
  cp "$B/librsverbs.so.1" "$lib/.librsverbs.so.1.$$"
  mv -f "$lib/.librsverbs.so.1.$$" "$lib/librsverbs.so.1"
  ln -sf librsverbs.so.1 "$lib/librsverbs.so"
fi
if [ "$out/bench" -nt bench/bench.c ] && [ "$out/bench.rsv" -nt bench/bench.c ] &&
   [ "$out/bench.rsv" -nt "$lib/librsverbs.so.1" ]; then
  exit 0
fi
export PKG_CONFIG_PATH=$B/pkgconfig
CFLAGS=(-O2 -g -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -Iinclude)
cc "${CFLAGS[@]}" -o "$out/bench" bench/bench.c -libverbs -ldl -lm
# shellcheck disable=SC2046
cc "${CFLAGS[@]}" -o "$out/bench.rsv" bench/bench.c -L"$lib" $(pkg-config --cflags --libs rsverbs) \
  -Wl,-rpath,"$lib" -ldl -lm
echo "bench/build.sh: built bench/out/bench and bench/out/bench.rsv (librsverbs.so.1 copied to bench/out/lib)"
