# shellcheck shell=bash
# Shared by the ctest/*.sh suites: result lines and the tally that
# ctest/summary.sh prints as "N passed, N failed" at the end of make check.
RESULTS_DIR=${RESULTS_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/out}
mkdir -p "$RESULTS_DIR"
SUITE=${SUITE:-$(basename "$0" .sh)}
: > "$RESULTS_DIR/$SUITE.results"
suite_failed=0
pass() { echo "PASS $SUITE: $*"; echo "PASS $*" >> "$RESULTS_DIR/$SUITE.results"; }
fail() { echo "FAIL $SUITE: $*" >&2; echo "FAIL $*" >> "$RESULTS_DIR/$SUITE.results"; suite_failed=1; }
# check NAME CMD...: runs CMD, passes when it exits 0.
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }
# depends_on_libc_alone DEPENDS: a package's Depends field is libc6 (>= V)
# and nothing else, as dpkg-shlibdeps finds for librsverbs1: built without
# std, the library links only the C library (Makefile, NATIVE_LIBS).
depends_on_libc_alone() { grep -Eq '^libc6 \(>= [0-9.]+\)$' <<<"$1"; }
# twin_lib B: the library from the other linker than the build in B
# (zig's lld or GNU ld, by B/linker), into B/twin-OTHER; sets linker, other
# and twin, and fails when that build does.
twin_lib() {
  linker=$(cat "$1/linker" 2>/dev/null || echo zig)
  other=gnu; [ "$linker" = gnu ] && other=zig
  twin=$1/twin-$other
  make -s LINKER="$other" BUILD="$twin" "$twin/librsverbs.so.1" >/dev/null
}
finish() {
  local p f
  p=$(grep -c '^PASS' "$RESULTS_DIR/$SUITE.results" || true)
  f=$(grep -c '^FAIL' "$RESULTS_DIR/$SUITE.results" || true)
  echo "$SUITE: $p passed, $f failed"
  return "$suite_failed"
}
# wait_until SECS CMD...: polls CMD every 0.1 s until it succeeds (returns 0)
# or SECS seconds have passed (returns 1): for kernel state that follows an
# event asynchronously (a GID table after an address change).
wait_until() {
  local end=$((SECONDS + $1))
  shift
  until "$@"; do
    [ "$SECONDS" -ge "$end" ] && return 1
    sleep 0.1
  done
}
# tcp_listening PORT [PID]: a TCP socket listens on PORT (/proc/net/tcp{,6};
# with PID, in that process's network namespace: /proc/PID/net; shell
# builtins only, cheap under TCG).
tcp_listening() {
  local hex f _ a st
  printf -v hex ':%04X' "$1"
  for f in /proc${2:+/$2}/net/tcp /proc${2:+/$2}/net/tcp6; do
    while read -r _ a _ st _; do [[ $a == *"$hex" && $st == 0A ]] && return 0; done < "$f"
  done
  return 1
}
# dummy_rxe NETDEV RXEDEV ADDR4/LEN ADDR6/LEN (guest suites, as root): a dummy
# netdev NETDEV, up, with the two addresses (the IPv6 one nodad), and a
# Soft-RoCE device RXEDEV on it; returns non-zero when a step fails.  Sets the
# EXIT trap (replacing any) to dummy_rxe_remove, which deletes both again; a
# suite that removes them itself calls it and clears the trap.  Only defined
# here: lib.sh is sourced on the host too.
dummy_rxe() {
  DUMMY_RXE_NETDEV=$1 DUMMY_RXE_DEV=$2
  trap dummy_rxe_remove EXIT
  ip link add "$1" type dummy && ip link set "$1" up &&
    ip addr add "$3" dev "$1" && ip -6 addr add "$4" dev "$1" nodad &&
    timeout 60 rdma link add "$2" type rxe netdev "$1"
}
dummy_rxe_remove() {
  [ -n "${DUMMY_RXE_DEV:-}" ] || return 0
  timeout 60 rdma link delete "$DUMMY_RXE_DEV" 2>/dev/null
  timeout 20 ip link delete "$DUMMY_RXE_NETDEV" 2>/dev/null
}
# exports LIB: the defined dynamic symbols of LIB with their versions, sorted
# (GNU ld also lists each version node as an ABS symbol: not an export;
# ppc64's readelf adds "[<localentry>: N]" before the section: dropped).
exports() {
  readelf --dyn-syms -W "$1" | sed 's/\[<localentry>: [0-9]*\] //' |
    awk '$7 != "UND" && $7 != "ABS" && ($5 == "GLOBAL" || $5 == "WEAK") && $4 != "SECTION" {print $8}' | sort
}
# verdefs LIB: its version definitions, sorted.
verdefs() { readelf -V -W "$1" | sed -n '/^Version definition/,/^Version needs/p' | grep -o 'Name: [^ ]*' | sort; }
# elf_is LIB MACHINE ORDER: readelf -h names them (testbed/arch.sh ARCH_ELF,
# "MACHINE|ORDER").
elf_is() { local h; h=$(readelf -h "$1") && grep -q "Machine: *$2" <<< "$h" && grep -q "Data:.*$3" <<< "$h"; }
# same_abi LIB REF MACHINE ORDER: elf_is LIB, and REF's (another
# architecture's build of the library) exports and version definitions.
same_abi() {
  elf_is "$1" "$3" "$4" && [ "$(exports "$1")" = "$(exports "$2")" ] && [ "$(verdefs "$1")" = "$(verdefs "$2")" ]
}
# igmp_held NETDEV A.B.C.D: the netdev holds an IPv4 group in /proc/net/igmp,
# whose group column is the address's 4 bytes read as a u32 in the host's
# byte order, "%08X" (igmp.c igmp_mc_seq_show): reversed on little-endian.
igmp_held() {
  local a b c d hex
  IFS=. read -r a b c d <<< "$2"
  if [ "$(printf '\001\000' | od -An -tu2 | tr -d ' ')" = 1 ]; then
    printf -v hex '%02X%02X%02X%02X' "$d" "$c" "$b" "$a"
  else
    printf -v hex '%02X%02X%02X%02X' "$a" "$b" "$c" "$d"
  fi
  awk -v nd="$1" -v g="$hex" '/^[0-9]/ { in_nd = ($2 == nd) } in_nd && $1 == g { f = 1 } END { exit !f }' /proc/net/igmp
}
