#!/usr/bin/env bash
# Builds every guest test program ctest/vm/NAME.c twice, into ctest/out/bin:
#   NAME      linked against rdma-core only (the reference; preload target)
#   NAME.rsv  relinked with $(pkg-config --libs rsverbs), rsverbs first
set -euo pipefail
cd "$(dirname "$0")/.."
B=${RSVERBS_BUILD:-$PWD/build}
out=ctest/out/bin
mkdir -p "$out"
export PKG_CONFIG_PATH=$B/pkgconfig
CFLAGS=(-O2 -g -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -Iinclude)
LIBS=(-lrdmacm -ldl -lpthread -lm)
for src in ctest/vm/*.c; do
  name=$(basename "$src" .c)
  newest=$(ls -t "$src" ctest/vm/*.h 2>/dev/null | head -1)
  [ "$out/$name" -nt "$newest" ] && [ "$out/$name.rsv" -nt "$B/librsverbs.so.1" ] && continue
  cc "${CFLAGS[@]}" -o "$out/$name" "$src" -libverbs "${LIBS[@]}"
  # shellcheck disable=SC2046
  cc "${CFLAGS[@]}" -o "$out/$name.rsv" "$src" $(pkg-config --cflags --libs rsverbs) -Wl,-rpath,"$B" "${LIBS[@]}"
done
echo "build: $(find "$out" -type f | wc -l) test binaries in $out"
