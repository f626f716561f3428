#!/usr/bin/env bash
# Builds every guest test program ctest/vm/NAME.c twice:
#   NAME      linked against rdma-core only (the reference; preload target)
#   NAME.rsv  relinked with $(pkg-config --libs rsverbs), rsverbs first
# into ctest/out/bin, with the host's compiler and rdma-core (the bookworm
# userland, the default).  With RSVERBS_USERLAND=bullseye|trixie|sid they are
# compiled in and for that userland (testbed/vm.sh root), with its gcc and
# rdma-core, by chroot into its root, into ctest/out/USERLAND/bin.  Either
# way NAME.rsv finds librsverbs.so.1 through its rpath, the repository's
# build/ (the same file for every userland).  With RSVERBS_ARCH=arm64|ppc64el|s390x
# (testbed/arch.sh) they are compiled in that architecture's userland (its
# gcc under qemu-user-static) into ctest/out/USERLAND-ARCH/bin, against
# build-ARCH/librsverbs.so.1 (make lib ARCH=...; build-arm64, for example).
# shellcheck disable=SC2012 # ls -t: our own file names
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=testbed/arch.sh
. testbed/arch.sh
# Another architecture's library is always build-ARCH: RSVERBS_BUILD, which
# the Makefile exports, names the host's.
if [ "$ARCH_FOREIGN" = 1 ]; then B=$PWD/$ARCH_BUILD; else B=${RSVERBS_BUILD:-$PWD/build}; fi
# The programs link against that architecture's library: built here when it
# is not (make matrix-arch on a fresh clone, where nothing else built it;
# up to date, make lib does nothing).
if [ "$ARCH_FOREIGN" = 1 ]; then arch_lib || { echo "build: make lib ARCH=$ARCH_DEB failed" >&2; exit 1; }; fi
U=${RSVERBS_USERLAND:-bookworm}
CFLAGS=(-O2 -g -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -Iinclude)
LIBS=(-lrdmacm -ldl -lpthread -lm)

if [ "$U" = bookworm ] && [ "$ARCH_FOREIGN" = 0 ]; then
  out=$(arch_test_bin "$U")
  mkdir -p "$out"
  export PKG_CONFIG_PATH=$B/pkgconfig
  for src in ctest/vm/*.c; do
    name=$(basename "$src" .c)
    newest=$(ls -t "$src" ctest/vm/*.h 2>/dev/null | head -1)
    [ "$out/$name" -nt "$newest" ] && [ "$out/$name.rsv" -nt "$B/librsverbs.so.1" ] && continue
    cc "${CFLAGS[@]}" -o "$out/$name" "$src" -libverbs "${LIBS[@]}"
    # shellcheck disable=SC2046
    cc "${CFLAGS[@]}" -o "$out/$name.rsv" "$src" $(pkg-config --cflags --libs rsverbs) -Wl,-rpath,"$B" "${LIBS[@]}"
  done
  # The rsverbs command with one errno of rsverbs' side broken on purpose
  # (src/tool/selftest.rs, --cfg rsverbs_selftest_broken), for
  # ctest/vm/selftest.sh only: its own target directory, without LTO.
  RUSTFLAGS="--cfg rsverbs_selftest_broken" CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_DEBUG=0 \
    CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 cargo build --release --locked --quiet \
    --manifest-path src/tool/Cargo.toml --target-dir target/tool-broken
  cp target/tool-broken/release/rsverbs "$out/rsverbs-broken"
  echo "build: $(find "$out" -type f | wc -l) test binaries in $out"
  exit 0
fi

# ---- another userland: compile inside its root ----------------------------
out=$(arch_test_bin "$U")
root=$(testbed/vm.sh root)
[ -x "$root/usr/bin/gcc" ] || { echo "build: no gcc in the $U userland $root" >&2; exit 1; }
mkdir -p "$out"
# Up to date: every binary newer than the sources and the library, built in
# this very root (a new root of the suite means new compilers and headers).
# The rsverbs command for this userland and architecture (ctest/vm/selftest.sh
# runs $BIN/rsverbs when there is one): the host's Rust objects linked by the
# host's gcc (another architecture's: its cross gcc) against the root's C
# library and libibverbs, so that it runs on that userland's glibc (the
# default build needs the host's: 2.34 and later symbols) and binds to its
# rdma-core. Not with --sysroot: Debian's libc6-dev has absolute symlinks
# (libpthread.so -> /lib/TRIPLET/libpthread.so.0, /lib64/ld-linux-x86-64.so.2),
# which ld would follow into the host. Instead a directory of its own that
# gcc searches first: the root's start files (-B), and each library the link
# names as a symlink to the root's file, its linker scripts' paths rewritten
# into the root (in_root). Without LTO: a test build; cargo keeps it up to date.
in_root() { # PATH: PATH in the root, its symlinks followed there, as a host path
  local p=$1 n=0 t
  while [ -L "$root$p" ] && [ $n -lt 16 ]; do
    t=$(readlink "$root$p")
    case $t in /*) p=$t ;; *) p=$(dirname "$p")/$t ;; esac
    n=$((n + 1))
  done
  echo "$root$p"
}
tool_for_root() {
  local target=$ARCH_RUST-unknown-linux-gnu dir=$PWD/target/tool-$U-$ARCH_DEB var gcc=cc t L lib f w
  t=$(ls "$root/usr/lib" | grep -- '-linux-gnu' | head -1)
  ((ARCH_FOREIGN)) && gcc=$ARCH_RUST-linux-gnu-gcc
  L=$dir/link
  rm -rf "$L" && mkdir -p "$L"
  for lib in libc libm libpthread libdl librt libutil libibverbs; do
    f=/usr/lib/$t/$lib.so
    [ -e "$(in_root "$f")" ] || continue
    if [ ! -L "$root$f" ] && grep -q 'GROUP\|INPUT' "$root$f" 2>/dev/null; then
      cp "$root$f" "$L/$lib.so"
      grep -o ' /[^ )]*' "$root$f" | sort -u | while read -r w; do
        sed -i "s# $w# $(in_root "$w")#g" "$L/$lib.so"
      done
    else
      ln -s "$(in_root "$f")" "$L/$lib.so"
    fi
  done
  for f in /usr/lib/$t/libgcc_s.so.1 /lib/$t/libgcc_s.so.1; do
    [ -e "$(in_root "$f")" ] && { ln -sf "$(in_root "$f")" "$L/libgcc_s.so.1"; break; }
  done
  var=CARGO_TARGET_$(echo "$target" | tr a-z- A-Z_)
  env "${var}_LINKER=$gcc" "${var}_RUSTFLAGS=-L native=$L -C link-arg=-B$root/usr/lib/$t/ -C link-arg=-Wl,-rpath-link=$root/usr/lib/$t" \
    CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 CARGO_PROFILE_RELEASE_DEBUG=0 \
    cargo build --release --locked --quiet --manifest-path src/tool/Cargo.toml --target-dir "$dir" --target "$target" &&
    cp "$dir/$target/release/rsverbs" "$out/rsverbs.tmp" && mv "$out/rsverbs.tmp" "$out/rsverbs"
}
mkdir -p "$out"
tool_for_root || echo "build: WARNING: the rsverbs command for the $U userland ($ARCH_DEB) did not build" >&2

stamp=$out/.root
fresh=1
[ "$(cat "$stamp" 2>/dev/null)" = "$root" ] || fresh=0
for src in ctest/vm/*.c; do
  name=$(basename "$src" .c)
  newest=$(ls -t "$src" ctest/vm/*.h include/rsverbs.h 2>/dev/null | head -1)
  { [ "$out/$name" -nt "$newest" ] && [ "$out/$name.rsv" -nt "$B/librsverbs.so.1" ]; } || fresh=0
done
if [ $fresh = 1 ]; then
  echo "build: $(find "$out" -type f ! -name .root | wc -l) test binaries in $out (up to date, $U)"
  exit 0
fi

# shellcheck source=testbed/rootbuild.sh
. testbed/rootbuild.sh
root_scratch "$root" "$B"
s=$SCRATCH
mkdir -p "$s/src"
cp ctest/vm/*.c ctest/vm/*.h "$s/src/"
# shellcheck disable=SC2016 # the script's $ are its own
{
  echo 'set -u; cd "$(dirname "$0")"; export PKG_CONFIG_PATH=$PWD/lib/pkgconfig; st=0'
  root_cc_lines "$root"
  printf 'CFLAGS=(%s)\nLIBS=(%s)\nRPATH=%q\n' "${CFLAGS[*]}" "${LIBS[*]}" "$B"
  # One program (both builds) a job, as many jobs as CPUs: a userland's
  # own gcc under qemu-user (sid's) takes minutes a program.
  echo 'one() {
    local src=$1 name
    name=$(basename "$src" .c)
    "${CC[@]}" "${CFLAGS[@]}" -Isrc -o "bin/$name" "$src" -libverbs "${LIBS[@]}" || echo "build: $name: compile failed"
    "${CC[@]}" "${CFLAGS[@]}" -Isrc -o "bin/$name.rsv" "$src" $(pkg-config --cflags --libs rsverbs) -Wl,-rpath,"$RPATH" "${LIBS[@]}" ||
      echo "build: $name.rsv: relink against librsverbs failed"
  }
  for src in src/*.c; do
    while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n; done
    one "$src" &
  done
  wait
  for src in src/*.c; do
    name=$(basename "$src" .c)
    [ -x "bin/$name" ] && [ -x "bin/$name.rsv" ] || st=1
  done
  exit $st'
} > "$s/build.sh"
rc=0
root_build "$root" || rc=$?
find "$out" -maxdepth 1 -type f ! -name rsverbs -delete
cp -p "$s"/bin/* "$out/" 2>/dev/null || true
echo "$root" > "$stamp"
echo "build: $(find "$out" -type f ! -name .root | wc -l) test binaries in $out ($(root_describe "$root"), $U; $ROOT_BUILT)"
if [ $rc -ne 0 ]; then
  # Missing programs fail the suites that run them, visibly; the others run.
  echo "build: WARNING: some $U test programs did not build (see above)" >&2
fi
exit 0
