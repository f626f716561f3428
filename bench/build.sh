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
# build NAME SRC LIBS...: NAME (rdma-core) and NAME.rsv (relinked), when stale.
build() {
  local name=$1 src=$2; shift 2
  if [ "$out/$name" -nt "$src" ] && [ "$out/$name.rsv" -nt "$src" ] && [ "$out/$name.rsv" -nt "$lib/librsverbs.so.1" ] &&
     [ "$out/$name" -nt ctest/vm/common.h ] && [ "$out/$name" -nt bench/timing.h ]; then
    return
  fi
  cc "${CFLAGS[@]}" -o "$out/$name" "$src" -libverbs "$@"
  # shellcheck disable=SC2046
  cc "${CFLAGS[@]}" -o "$out/$name.rsv" "$src" -L"$lib" $(pkg-config --cflags --libs rsverbs) -Wl,-rpath,"$lib" "$@"
  echo "bench/build.sh: built bench/out/$name and bench/out/$name.rsv"
}
export PKG_CONFIG_PATH=$B/pkgconfig
CFLAGS=(-O2 -g -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -Iinclude)
build bench bench/bench.c -ldl -lm
build curve bench/curve.c -lpthread
# The load-cost helpers: a spawn timer, and an empty library to preload.
if [ ! "$out/spawn" -nt bench/spawn.c ] || [ ! "$out/spawn" -nt bench/timing.h ]; then
  cc "${CFLAGS[@]}" -o "$out/spawn" bench/spawn.c -ldl
  cc -O2 -shared -fPIC -o "$lib/libempty.so" -x c /dev/null
fi
