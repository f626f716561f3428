#!/usr/bin/env bash
# What takes the space in librsverbs.so.1: the stripped file's sections, and
# the code and data by owner, from the symbol sizes of the unstripped file.
#   bench/sizes.sh [LIB]    (default build/librsverbs.so.1); prints Markdown.
# Owners: rsverbs' own code; its no_std runtime (src/runtime.rs: the panic
# handler rustc names rust_begin_unwind, the allocator shim __rust_alloc and
# the rest, the rust_eh_personality and _Unwind_Resume stubs and their
# DW.ref pointers); formatting (core::fmt); the rest of core and alloc; what
# has no Rust path (libc glue, unnamed). The product is built without std
# (docs/building.md); a build with it (an older one, cargo's target/) also
# shows std's backtrace printer and unwinder (gimli, addr2line, object,
# miniz_oxide, rustc_demangle, libunwind: what std's default panic hook
# links, even with panic=abort), and counts std's own panic handler,
# allocator shim and _Unwind_Resume as the runtime.
# Another architecture's file is read with its cross binutils (this host's
# know only its own), e.g. aarch64-linux-gnu-nm: BINUTILS_PREFIX, or found
# from the file's ELF machine.
set -euo pipefail
lib=${1:-build/librsverbs.so.1}
[ -f "$lib" ] || { echo "bench/sizes.sh: no $lib (make lib)" >&2; exit 2; }
if [ -z "${BINUTILS_PREFIX+set}" ]; then
  case $(readelf -h "$lib" | sed -n 's/^ *Machine: *//p') in
    AArch64) BINUTILS_PREFIX=aarch64-linux-gnu- ;;
    PowerPC64) BINUTILS_PREFIX=powerpc64le-linux-gnu- ;;
    "IBM S/390") BINUTILS_PREFIX=s390x-linux-gnu- ;;
    *) BINUTILS_PREFIX= ;;
  esac
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"${BINUTILS_PREFIX}strip" -o "$tmp/stripped" "$lib"
total=$(stat -c %s "$tmp/stripped")

echo "| section of the stripped file | bytes | share |"
echo "|---|---:|---:|"
"${BINUTILS_PREFIX}size" -A "$tmp/stripped" | awk '$1 ~ /^\./ && $2 > 0 && $1 != ".bss" && $1 != ".tbss" { printf "%s\t%d\n", $1, $2 }' | sort -t$'\t' -k2 -nr | head -8 |
  awk -F'\t' -v t="$total" '{ printf "| `%s` | %d | %.0f%% |\n", $1, $2, 100 * $2 / t }'
echo "| the whole file | $total | 100% |"
echo

# Code and read-only/initialised data by owner (nm -S: symbols with a size;
# .bss is not in the file and is left out).
"${BINUTILS_PREFIX}nm" -S -C --defined-only "$lib" | awk 'NF >= 4 && $3 ~ /^[TtRrDdWwVv]$/' > "$tmp/syms"
awk '
  function hex(s,   i, v, d) { v = 0; s = tolower(s); for (i = 1; i <= length(s); i++) { d = index("0123456789abcdef", substr(s, i, 1)) - 1; v = v * 16 + d } return v }
  { sz = hex($2); $1 = $2 = $3 = ""; n = $0
    if (n ~ /^ *(__rustc::)?(rust_begin_unwind|__rust_(alloc|dealloc|realloc|alloc_zeroed)|rust_eh_personality|_Unwind_Resume|DW\.ref\.)/) c = "rsverbs: the no_std runtime (panic, allocator, unwinding stubs)"
    else if (n ~ /gimli|addr2line|miniz_oxide|rustc_demangle|backtrace|libunwind|_Unwind_|object::read|__rust_begin_short_backtrace|std::sys::backtrace/) c = "std: backtrace printer and unwinder"
    else if (n ~ /rsverbs::|rsverbs_|ibv_/) c = "rsverbs"
    else if (n ~ /core::fmt|fmt::/) c = "core::fmt (formatting)"
    else if (n ~ /std::|core::|alloc::|hashbrown|__rdl_|__rust_|<&|<\[/) c = "the rest of core and alloc (and std)"
    else c = "no Rust path (libc glue, unnamed)"
    tot[c] += sz; all += sz }
  END { for (c in tot) printf "%s\t%d\t%.0f\n", c, tot[c], 100 * tot[c] / all; printf "all sized symbols\t%d\t100\n", all }
' "$tmp/syms" > "$tmp/owners"
echo "| code and data by owner (symbol sizes) | bytes | share |"
echo "|---|---:|---:|"
grep -v '^all sized' "$tmp/owners" | sort -t$'\t' -k2 -nr | awk -F'\t' '{ printf "| %s | %d | %d%% |\n", $1, $2, $3 }'
awk -F'\t' '/^all sized/ { printf "| all sized symbols | %d | 100%% |\n", $2 }' "$tmp/owners"
