#!/usr/bin/env bash
# ABI checks on the host (no device needed): struct layout, prototypes,
# exported symbols and versions, both link modes, the 1.0 compat guard, and
# install/uninstall.
set -uo pipefail
cd "$(dirname "$0")/.."
source ctest/lib.sh
B=${RSVERBS_BUILD:-$PWD/build}
LIB=$B/librsverbs.so.1
O=ctest/out/abi; mkdir -p "$O"
export PKG_CONFIG_PATH=$B/pkgconfig

check "struct layout vs installed verbs.h" sh -c "cc -std=c11 -Wall -Werror ctest/abi_layout.c -o $O/abi_layout && $O/abi_layout"
check "C prototypes identical to verbs.h" cc -std=c11 -Wall -Werror -Iinclude -c ctest/proto.c -o $O/proto.o
check "C++ prototypes identical to verbs.h" c++ -std=c++11 -Wall -Werror -Iinclude -c ctest/proto.cpp -o $O/proto_cpp.o

# Exactly these defined dynamic symbols, with these versions (exports and
# verdefs: ctest/lib.sh).
want=$'_ibv_query_gid_ex@@IBVERBS_1.11\n_ibv_query_gid_table@@IBVERBS_1.11\nibv_attach_mcast@@IBVERBS_1.1\nibv_detach_mcast@@IBVERBS_1.1\nibv_query_gid@@IBVERBS_1.1\nrsverbs_attach_mcast@@RSVERBS_0.1\nrsverbs_detach_mcast@@RSVERBS_0.1\nrsverbs_gid_index_find@@RSVERBS_0.3\nrsverbs_gid_index_perftest@@RSVERBS_0.3\nrsverbs_gid_index_rdma_cm@@RSVERBS_0.3\nrsverbs_mcast_attachments@@RSVERBS_0.2\nrsverbs_mcast_join@@RSVERBS_0.4\nrsverbs_mcast_leave@@RSVERBS_0.4\nrsverbs_query_gid@@RSVERBS_0.3\nrsverbs_query_gid_ex@@RSVERBS_0.1\nrsverbs_query_gid_table@@RSVERBS_0.3'
got=$(exports "$LIB")
if [ "$got" = "$want" ]; then pass "exported symbol set is exact"; else fail "exported symbols: $(echo "$got" | tr '\n' ' ')"; fi

# The crate as an rlib (the rsverbs command; rsverbs::safe users) defines no
# libibverbs name: its calls of ibv_* stay rdma-core's (docs/building.md).
tool=${RSVERBS_TOOL:-$B/rsverbs}
check "the rsverbs command (the rlib) defines no ibv_* name" \
  sh -c '[ -x "$1" ] && ! nm "$1" | grep -Eq " [TtWw] _?ibv_"' _ "$tool"

# The command's usage errors need no device (docs/tool.md, rsverbs(1)): a non-UTF-8
# argument is exit 2 with the usage on stderr (it was a panic: SIGABRT, exit
# 134). A device name that does not exist is a runtime failure (docs/tool.md, Conventions):
# exit 1, one line on stderr, no usage ("no RDMA devices; ..." on a host
# without any, "unknown device ..." on one with some).
# usage_rc ARGS...: the exit status, when stderr has the usage and stdout is empty.
usage_rc() {
  "$tool" "$@" >"$O/tool.out" 2>"$O/tool.err"
  local rc=$?
  if grep -q '^usage: rsverbs' "$O/tool.err" && [ ! -s "$O/tool.out" ]; then echo $rc; else echo "$rc (no usage on stderr, or output on stdout)"; fi
}
rc=$(usage_rc gids "$(printf 'rxe\377')")
check "rsverbs gids with a non-UTF-8 argument: usage error, exit 2 (got $rc)" [ "$rc" = 2 ]
rc=$(usage_rc doctor 239.1.1.1 --dev "$(printf '\377')")
check "rsverbs doctor with a non-UTF-8 --dev: usage error, exit 2 (got $rc)" [ "$rc" = 2 ]
"$tool" gids rsverbs-no-such-device >"$O/tool.out" 2>"$O/tool.err"
rc=$?
check "rsverbs gids with a device that does not exist: exit 1, one line on stderr, no usage (got $rc: $(head -1 "$O/tool.err"))" \
  sh -c '[ "$1" = 1 ] && [ ! -s "$2" ] && [ "$(grep -vc "^libibverbs: " "$3")" = 1 ] && grep -Eq "^rsverbs: (no RDMA devices|unknown device)" "$3" && ! grep -q "^usage:" "$3"' \
  _ $rc "$O/tool.out" "$O/tool.err"

# The same exports and version nodes from the other linker (GNU ld vs zig's
# lld): the link is one decision for both (docs/building.md).
if twin_lib "$B"; then
  check "$other-linked twin: same exported symbols as the $linker build" [ "$(exports "$twin/librsverbs.so.1")" = "$got" ]
  check "$other-linked twin: same version definitions as the $linker build" [ "$(verdefs "$twin/librsverbs.so.1")" = "$(verdefs "$LIB")" ]
else
  fail "$other-linked twin: make LINKER=$other failed"
fi

# The glibc floor: the zig link (make's default output, whichever of the two
# builds above it is; not taken from the label) imports no GLIBC_ version
# newer than the floor.
floor=${RSVERBS_GLIBC_FLOOR:-2.17}
zig_lib=$LIB
[ "$linker" = zig ] || zig_lib=$twin/librsverbs.so.1
newest=$(objdump -T "$zig_lib" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
check "the zig link imports no glibc symbol version above $floor (newest: GLIBC_$newest)" \
  sh -c '[ -n "$1" ] && [ "$(printf "%s\n" "$1" "$2" | sort -V | tail -1)" = "$2" ]' _ "$newest" "$floor"
check "SONAME is librsverbs.so.1" sh -c "readelf -d $LIB | grep -q 'Library soname: \[librsverbs.so.1\]'"
# Built without std (docs/building.md): none of std's code, nor the
# unwinder its panic hook needed, in either link.
for l in "$LIB" "$twin/librsverbs.so.1"; do
  check "$(basename "$(dirname "$l")")/librsverbs.so.1 has no std code and no unwinder (no_std)" \
    sh -c '[ -f "$1" ] && ! nm -C "$1" | grep -Eq " std::|_Unwind_RaiseException|gimli::"' _ "$l"
done
check "pkg-config puts -lrsverbs before -libverbs" sh -c "pkg-config --libs rsverbs | grep -Eq -- '-lrsverbs .*-libverbs'"

# Relinked: an unmodified rdma-core program built with pkg-config.
cc -Wall -o "$O/null_relinked" ctest/null_args.c $(pkg-config --cflags --libs rsverbs) -Wl,-rpath,"$B" -ldl
LD_DEBUG=bindings "$O/null_relinked" > "$O/relinked.out" 2> "$O/relinked.bindings"
check "relinked: NULL args give EINVAL, no crash" grep -q "null_args: ok" "$O/relinked.out"
# Preloaded: the same source linked against rdma-core only.
cc -Wall -o "$O/null_plain" ctest/null_args.c -libverbs -ldl
LD_PRELOAD=$LIB LD_DEBUG=bindings "$O/null_plain" > "$O/preload.out" 2> "$O/preload.bindings"
check "preload: NULL args give EINVAL, no crash" grep -q "null_args: ok" "$O/preload.out"
for mode in relinked preload; do
  for sym in "ibv_attach_mcast' \[IBVERBS_1.1\]" "ibv_detach_mcast' \[IBVERBS_1.1\]" "_ibv_query_gid_ex' \[IBVERBS_1.11\]" \
    "ibv_query_gid' \[IBVERBS_1.1\]" "_ibv_query_gid_table' \[IBVERBS_1.11\]"; do
    check "$mode: ${sym%%\'*} bound to librsverbs" grep -Eq "to $B/librsverbs.so.1 \[0\]: normal symbol \`$sym" "$O/$mode.bindings"
  done
  check "$mode: dladdr owner of all five is librsverbs" sh -c "[ \$(grep -c '^owner .*librsverbs.so.1' $O/$mode.out) = 5 ]"
done

# The IBVERBS_1.0 compat entry points (struct ibv_qp_1_0 *, struct ibv_context_1_0 *) stay rdma-core's.
cc -Wall -o "$O/compat10" ctest/compat10.c -libverbs
LD_BIND_NOW=1 LD_PRELOAD=$LIB LD_DEBUG=bindings "$O/compat10" > /dev/null 2> "$O/compat10.bindings"
check "preload leaves ibv_attach_mcast@IBVERBS_1.0 to libibverbs" grep -Eq "to /.*libibverbs.so.1 \[0\]: normal symbol \`ibv_attach_mcast' \[IBVERBS_1.0\]" "$O/compat10.bindings"
check "preload leaves ibv_detach_mcast@IBVERBS_1.0 to libibverbs" grep -Eq "to /.*libibverbs.so.1 \[0\]: normal symbol \`ibv_detach_mcast' \[IBVERBS_1.0\]" "$O/compat10.bindings"
check "preload leaves ibv_query_gid@IBVERBS_1.0 to libibverbs" grep -Eq "to /.*libibverbs.so.1 \[0\]: normal symbol \`ibv_query_gid' \[IBVERBS_1.0\]" "$O/compat10.bindings"

# install/uninstall with DESTDIR and custom directories.
d=$(mktemp -d)
make -s install DESTDIR="$d" PREFIX=/opt/rsv LIBDIR=/opt/rsv/lib64 INCLUDEDIR=/opt/rsv/inc >/dev/null
check "install: library, SONAME links, header, pc" test -f "$d/opt/rsv/lib64/librsverbs.so.1.0.0" -a -L "$d/opt/rsv/lib64/librsverbs.so.1" \
  -a -L "$d/opt/rsv/lib64/librsverbs.so" -a -f "$d/opt/rsv/inc/rsverbs.h" -a -f "$d/opt/rsv/lib64/pkgconfig/rsverbs.pc"
check "install: the rsverbs command in PREFIX/bin, its page in MANDIR/man1" test -x "$d/opt/rsv/bin/rsverbs" -a -f "$d/opt/rsv/share/man/man1/rsverbs.1"
check "install: pc points at LIBDIR/INCLUDEDIR" grep -q '^libdir=/opt/rsv/lib64$' "$d/opt/rsv/lib64/pkgconfig/rsverbs.pc"
make -s uninstall DESTDIR="$d" PREFIX=/opt/rsv LIBDIR=/opt/rsv/lib64 INCLUDEDIR=/opt/rsv/inc >/dev/null
check "uninstall removes every file" test -z "$(find "$d" -type f -o -type l)"
rm -rf "$d"
finish
