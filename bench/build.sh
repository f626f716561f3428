#!/usr/bin/env bash
# Builds the benchmark program twice (needs `make all`, or for another
# architecture `make lib ARCH=...`):
#   bench      linked against rdma-core only (rdma-core, preload and floor)
#   bench.rsv  relinked with $(pkg-config --libs rsverbs), rsverbs first
# (and curve, curve.rsv, the spawn timer and an empty library to preload)
# against a private copy of the library in OUT/lib, so that a run measures
# one library even if the build directory is rebuilt meanwhile.
# OUT is bench/out for this host (its compiler and rdma-core, the bookworm
# userland); with RSVERBS_ARCH=arm64|ppc64el|s390x (testbed/arch.sh) it is
# bench/out/ARCH, compiled in that architecture's bookworm userland by its
# own gcc under qemu-user-static (testbed/rootbuild.sh, as ctest/build.sh).
# Prints OUT on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=testbed/arch.sh
. testbed/arch.sh
if [ "$ARCH_FOREIGN" = 1 ]; then
  B=$PWD/$ARCH_BUILD out=$PWD/bench/out/$ARCH_DEB
else
  B=${RSVERBS_BUILD:-$PWD/build} out=$PWD/bench/out
fi
lib=$out/lib
[ -e "$B/librsverbs.so.1" ] || { echo "bench/build.sh: $B/librsverbs.so.1 missing: run make all (or make lib ARCH=...)" >&2; exit 1; }
mkdir -p "$lib"
if ! cmp -s "$B/librsverbs.so.1" "$lib/librsverbs.so.1"; then
  cp "$B/librsverbs.so.1" "$lib/.librsverbs.so.1.$$"
  mv -f "$lib/.librsverbs.so.1.$$" "$lib/librsverbs.so.1"
  ln -sf librsverbs.so.1 "$lib/librsverbs.so"
fi
CFLAGS=(-O2 -g -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -Iinclude)
# stale NAME SRC: NAME or NAME.rsv older than its source, the shared
# headers or the library copy.
stale() {
  ! { [ "$out/$1" -nt "$2" ] && [ "$out/$1.rsv" -nt "$2" ] && [ "$out/$1.rsv" -nt "$lib/librsverbs.so.1" ] &&
      [ "$out/$1" -nt ctest/vm/common.h ] && [ "$out/$1" -nt bench/timing.h ]; }
}

if [ "$ARCH_FOREIGN" = 1 ]; then
  stale bench bench/bench.c || stale curve bench/curve.c || [ ! "$out/spawn" -nt bench/spawn.c ] ||
    { echo "$out"; exit 0; }
  root=$(RSVERBS_USERLAND=bookworm testbed/vm.sh root)
  # shellcheck source=testbed/rootbuild.sh
  . testbed/rootbuild.sh
  root_scratch "$root" "$lib"
  mkdir -p "$SCRATCH/bench" "$SCRATCH/ctest/vm"
  cp bench/*.c bench/timing.h "$SCRATCH/bench/"
  cp ctest/vm/common.h "$SCRATCH/ctest/vm/"
  # shellcheck disable=SC2016 # the script's $ are its own
  {
    echo 'set -eu; cd "$(dirname "$0")"; export PKG_CONFIG_PATH=$PWD/lib/pkgconfig'
    root_cc_lines "$root"
    printf 'CFLAGS=(%s)\nRPATH=%q\n' "${CFLAGS[*]}" "$lib"
    echo 'build() { # NAME LIBS...
      local name=$1; shift
      "${CC[@]}" "${CFLAGS[@]}" -o "bin/$name" "bench/$name.c" -libverbs "$@"
      "${CC[@]}" "${CFLAGS[@]}" -o "bin/$name.rsv" "bench/$name.c" $(pkg-config --cflags --libs rsverbs) -Wl,-rpath,"$RPATH" "$@"
    }
    build bench -ldl -lm
    build curve -lpthread
    "${CC[@]}" "${CFLAGS[@]}" -o bin/spawn bench/spawn.c -ldl
    "${CC[@]}" -O2 -shared -fPIC -o bin/libempty.so -x c /dev/null'
  } > "$SCRATCH/build.sh"
  root_build "$root"
  cp -p "$SCRATCH"/bin/{bench,bench.rsv,curve,curve.rsv,spawn} "$out/"
  cp -p "$SCRATCH/bin/libempty.so" "$lib/"
  echo "bench/build.sh: built the benchmark programs in $out ($(root_describe "$root"), bookworm $ARCH_DEB; $ROOT_BUILT)" >&2
  echo "$out"
  exit 0
fi

# build NAME SRC LIBS...: NAME (rdma-core) and NAME.rsv (relinked), when stale.
build() {
  local name=$1 src=$2; shift 2
  stale "$name" "$src" || return 0
  cc "${CFLAGS[@]}" -o "$out/$name" "$src" -libverbs "$@"
  # shellcheck disable=SC2046
  cc "${CFLAGS[@]}" -o "$out/$name.rsv" "$src" -L"$lib" $(pkg-config --cflags --libs rsverbs) -Wl,-rpath,"$lib" "$@"
  echo "bench/build.sh: built bench/out/$name and bench/out/$name.rsv" >&2
}
export PKG_CONFIG_PATH=$B/pkgconfig
build bench bench/bench.c -ldl -lm
build curve bench/curve.c -lpthread
# The load-cost helpers: a spawn timer, and an empty library to preload.
if [ ! "$out/spawn" -nt bench/spawn.c ] || [ ! "$out/spawn" -nt bench/timing.h ]; then
  cc "${CFLAGS[@]}" -o "$out/spawn" bench/spawn.c -ldl
  cc -O2 -shared -fPIC -o "$lib/libempty.so" -x c /dev/null
fi
echo "$out"
